"""A real Slurm cluster on this machine (`dlscale slurm up --nodes N`, `dlscale slurm down`), root only:
munged, MariaDB and slurmdbd (Snakemake's executor reads job states through sacct), slurmctld at HEAD_ADDR
on a link into the emulated switch, and a slurmd per emulated node in its namespace, on its CPUs, named in
/etc/hosts. slurmd enters the namespace with nsenter: `ip netns exec` mounts a /sys without its cgroups.
"""

import contextlib
import json
import os
import shutil
import signal
import subprocess
import time
from pathlib import Path

from dlscale.runtime import emulate

HERE = Path(__file__).resolve().parent
STATE = Path("/run/dlscale-slurm")
CONF = STATE / "slurm.conf"
SITE_CONF = Path("/etc/slurm/slurm.conf")
ETC_HOSTS = Path("/etc/hosts")
HOSTS_MARK = "# dlscale slurm"
CLUSTER = "dlscale"
PARTITION = "emulated"
ACCOUNT = "dlscale"
EMULATED = f"{emulate.PREFIX}-slurm"  # the emulated cluster's name (its namespaces: EMULATED-n<i>, -sw)
HEAD_ADDR = f"{emulate.SUBNET}.254"
HEAD_LINK = "dlslurm0"
DATABASE = "dlscale_slurm_acct"
DB_USER = "dlscale_slurm"
MUNGE_DIRS = [Path("/run/munge"), Path("/var/log/munge")]
MARIADB_SOCKET = Path("/run/mysqld/mysqld.sock")
COMMANDS = ["slurmctld", "slurmd", "slurmdbd", "sacctmgr", "sbatch", "munged", "mariadbd", "mariadb", "nsenter"]
PACKAGES = "slurm-wlm slurmdbd munge mariadb-server"
START_TIMEOUT_S = 60


class SlurmError(RuntimeError):
    pass


def node_name(i):
    return f"dlslurm-n{i}"


def environ():
    """The environment Slurm's commands need to find this cluster."""
    return {**os.environ, "SLURM_CONF": str(CONF)}


def available():
    """(True, "") when this machine can run the cluster, else (False, why not)."""
    if os.geteuid() != 0:
        return False, "a Slurm cluster on this machine needs root (daemons, network namespaces)"
    missing = [c for c in COMMANDS if not shutil.which(c)]
    if missing:
        return False, f"no {', '.join(missing)} on PATH (Debian: apt-get install {PACKAGES})"
    return emulate.available()


def is_up():
    return (STATE / "cluster.json").exists()


def _run(*argv, check=True, **kw):
    proc = subprocess.run(list(argv), capture_output=True, text=True, env=environ(), **kw)
    if check and proc.returncode != 0:
        raise SlurmError(f"`{' '.join(argv)}` failed: {(proc.stderr or proc.stdout).strip()}")
    return proc


def _wait(what, ready, logs=()):
    deadline = time.monotonic() + START_TIMEOUT_S
    while not ready():
        if time.monotonic() > deadline:
            tails = "".join(f"\n--- {p}:\n" + "".join(p.read_text().splitlines(True)[-8:]) for p in logs if p.exists())
            raise SlurmError(f"{what} did not come up in {START_TIMEOUT_S} s{tails}")
        time.sleep(0.5)


def _ok(*argv):
    return subprocess.run(list(argv), capture_output=True, env=environ()).returncode == 0


def _write(template, path, **values):
    path.write_text((HERE / template).read_text().format(**values))


def _munge(started):
    """munged, started unless one answers already."""
    if _ok("munge", "-n"):
        return
    for d in MUNGE_DIRS:
        d.mkdir(parents=True, exist_ok=True)
        shutil.chown(d, "munge", "munge")
    _run("su", "-s", "/bin/sh", "munge", "-c", "munged --force")
    _wait("munged", lambda: _ok("munge", "-n"))
    started["munged"] = int(Path("/run/munge/munged.pid").read_text())


def _mariadb(started):
    """A MariaDB server (unless one answers already) with this cluster's user and no old database."""
    if not _ok("mariadb", "-e", "select 1"):
        MARIADB_SOCKET.parent.mkdir(parents=True, exist_ok=True)
        shutil.chown(MARIADB_SOCKET.parent, "mysql", "mysql")
        log = open(STATE / "mariadb.log", "w")
        server = ["mariadbd", "--user=mysql", f"--socket={MARIADB_SOCKET}", "--skip-networking"]
        proc = subprocess.Popen(server, stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
        started["mariadbd"] = proc.pid
        _wait("the MariaDB server", lambda: _ok("mariadb", "-e", "select 1"), [STATE / "mariadb.log"])
    password, user = os.urandom(12).hex(), f"'{DB_USER}'@'localhost'"
    grants = f"ALTER USER {user} IDENTIFIED BY '{password}'; GRANT ALL ON {DATABASE}.* TO {user};"
    _run("mariadb", "-e", f"DROP DATABASE IF EXISTS {DATABASE}; CREATE USER IF NOT EXISTS {user}; {grants}")
    return password


def _head_link():
    """A link from this machine's namespace into the emulated switch, at HEAD_ADDR."""
    sw = f"{EMULATED}-sw"
    emulate._run("ip", "link", "add", HEAD_LINK, "type", "veth", "peer", "name", "head", "netns", sw)
    emulate._run("ip", "-n", sw, "link", "set", "head", "master", "br0")
    emulate._run("ip", "-n", sw, "link", "set", "head", "up")
    emulate._run("ip", "addr", "add", f"{HEAD_ADDR}/24", "dev", HEAD_LINK)
    emulate._run("ip", "link", "set", HEAD_LINK, "up")


def _node_lines(cluster, memory_mb):
    return "\n".join(
        f"NodeName={node_name(i)} NodeAddr={addr} CPUs={len(cpus.split(','))} RealMemory={memory_mb} State=UNKNOWN"
        for i, (addr, cpus) in enumerate(zip(cluster.hosts, cluster.cpus))
    )


def _hosts_file(cluster):
    lines = [line for line in ETC_HOSTS.read_text().splitlines(True) if not line.rstrip().endswith(HOSTS_MARK)]
    lines += [f"{addr} {node_name(i)} {HOSTS_MARK}\n" for i, addr in enumerate(cluster.hosts)]
    ETC_HOSTS.write_text("".join(lines))


def _slurmd(i, ns, cpus):
    name = node_name(i)
    (STATE / "spool" / name).mkdir(parents=True)
    (STATE / "tmp" / name).mkdir(parents=True)
    named = ["unshare", "--uts", "sh", "-c", f"hostname {name} && exec slurmd"]
    _run("taskset", "-c", cpus, "nsenter", f"--net=/run/netns/{ns}", *named)


def _nodes_idle(count):
    out = _run("sinfo", "-h", "-N", "-o", "%T", check=False).stdout.split()
    return len(out) == count and all(state == "idle" for state in out)


def _write_configs(cluster, nodes, password):
    """slurm.conf (a Slurm node per emulated node) and slurmdbd.conf (root's alone: it holds a password)."""
    memory_mb = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") // 2**20 // nodes
    head = {"cluster": CLUSTER, "head_name": os.uname().nodename, "head_addr": HEAD_ADDR, "partition": PARTITION}
    _write("slurm.conf.in", CONF, state=STATE, node_lines=_node_lines(cluster, memory_mb), **head)
    dbd = STATE / "slurmdbd.conf"
    _write("slurmdbd.conf.in", dbd, state=STATE, db_user=DB_USER, db_pass=password, database=DATABASE)
    dbd.chmod(0o600)
    if not SITE_CONF.exists() and SITE_CONF.parent.is_dir():
        SITE_CONF.symlink_to(CONF)


def _start_accounting():
    """slurmdbd, then the cluster, its account and root as its user (which sacct needs)."""
    _run("slurmdbd")
    _wait("slurmdbd", lambda: _ok("sacctmgr", "-n", "list", "cluster"), [STATE / "slurmdbd.log"])
    _run("sacctmgr", "-i", "add", "cluster", CLUSTER)
    _run("sacctmgr", "-i", "add", "account", ACCOUNT)
    _run("sacctmgr", "-i", "add", "user", "root", f"account={ACCOUNT}", f"defaultaccount={ACCOUNT}")


def up(nodes, rate_mbit=None, delay_ms=0):
    """Make the cluster (`nodes` Slurm nodes joined by emulated links); on any error remove it and raise."""
    ok, why = available()
    if not ok:
        raise SlurmError(why)
    if is_up():
        raise SlurmError(f"a Slurm cluster is up already ({STATE}); remove it with `dlscale slurm down`")
    STATE.mkdir(parents=True, exist_ok=True)
    started = {}
    try:
        cluster = emulate.up(nodes, rate_mbit, delay_ms, name=EMULATED)
        started["nodes"] = nodes
        (STATE / "cluster.json").write_text(json.dumps(started))
        _head_link()
        _munge(started)
        password = _mariadb(started)
        (STATE / "cluster.json").write_text(json.dumps(started))
        (STATE / "ctld").mkdir()
        _write_configs(cluster, nodes, password)
        _start_accounting()
        _run("slurmctld")
        _wait("slurmctld", lambda: _ok("scontrol", "ping"), [STATE / "slurmctld.log"])
        _hosts_file(cluster)
        for i, (ns, cpus) in enumerate(zip(cluster.namespaces, cluster.cpus)):
            _slurmd(i, ns, cpus)
        logs = [STATE / f"slurmd-{node_name(i)}.log" for i in range(nodes)] + [STATE / "slurmctld.log"]
        _wait(f"{nodes} idle Slurm nodes", lambda: _nodes_idle(nodes), logs)
    except BaseException:
        down()
        raise
    return cluster


def _stop(pid):
    """SIGTERM, then SIGKILL after 10 s: True if `pid` was running."""
    try:
        os.kill(pid, signal.SIGTERM)
    except ProcessLookupError:
        return False
    for _ in range(100):
        if not Path(f"/proc/{pid}").exists() or Path(f"/proc/{pid}/stat").read_text().split()[2] == "Z":
            return True
        time.sleep(0.1)
    os.kill(pid, signal.SIGKILL)
    return True


def _pid(path):
    with contextlib.suppress(OSError, ValueError):
        return int(path.read_text())
    return None


def down():
    """Remove the cluster, its daemons, database, /etc lines and STATE; returns what was stopped."""
    stopped = emulate.down(EMULATED)  # its namespaces (the head link goes with the switch's end)
    for daemon in ("slurmctld", "slurmdbd"):
        pid = _pid(STATE / f"{daemon}.pid")
        if pid and _stop(pid):
            stopped.append(daemon)
    started = json.loads((STATE / "cluster.json").read_text()) if is_up() else {}
    if shutil.which("mariadb") and _ok("mariadb", "-e", "select 1"):
        subprocess.run(["mariadb", "-e", f"DROP DATABASE IF EXISTS {DATABASE}"], capture_output=True)
    for daemon in ("mariadbd", "munged"):
        if started.get(daemon) and _stop(started[daemon]):
            stopped.append(daemon)
    if SITE_CONF.is_symlink() and SITE_CONF.readlink() == CONF:
        SITE_CONF.unlink()
    if ETC_HOSTS.exists():
        kept = [line for line in ETC_HOSTS.read_text().splitlines(True) if not line.rstrip().endswith(HOSTS_MARK)]
        ETC_HOSTS.write_text("".join(kept))
    shutil.rmtree(STATE, ignore_errors=True)
    return stopped
