"""Hostfiles: the nodes a study may run on (Open MPI's format), and the hosts of one job."""

import re
from pathlib import Path

from dlscale.core.errors import ConfigError


def parse_hostfile(path):
    """[(host, slots)] of an Open MPI hostfile (`host [slots=N] [max_slots=M]`, '#' comments; default 1 slot)."""
    path = Path(path)
    if not path.is_file():
        raise ConfigError(f"config key 'hostfile': file {path} does not exist")
    hosts = {}
    for number, raw in enumerate(path.read_text().splitlines(), start=1):
        line = raw.split("#", 1)[0].strip()
        if not line:
            continue
        host, *fields = line.split()
        slots = 1
        for field in fields:
            m = re.fullmatch(r"(slots|max_slots|max-slots)=(\d+)", field)
            if not m:
                raise ConfigError(f"{path}:{number}: cannot read {field!r}; expected 'slots=N'")
            if m.group(1) == "slots":
                slots = int(m.group(2))
        if slots < 1:
            raise ConfigError(f"{path}:{number}: slots must be at least 1, got {slots}")
        if host in hosts:
            raise ConfigError(f"{path}:{number}: host {host!r} is listed twice")
        hosts[host] = slots
    if not hosts:
        raise ConfigError(f"{path}: no hosts listed")
    return list(hosts.items())


def select_hosts(hosts, nodes, ranks_per_node, hostfile="hostfile"):
    """The first `nodes` hosts, each of which must offer `ranks_per_node` slots."""
    if nodes > len(hosts):
        raise ConfigError(f"config key 'nodes': {nodes} nodes asked for, but {hostfile} lists {len(hosts)} host(s)")
    chosen = hosts[:nodes]
    short = [f"{h} ({s} slots)" for h, s in chosen if s < ranks_per_node]
    if short:
        raise ConfigError(
            f"config key 'ranks_per_node': {ranks_per_node} ranks per node asked for, "
            f"but {hostfile} offers fewer slots on {', '.join(short)}"
        )
    return [h for h, _ in chosen]
