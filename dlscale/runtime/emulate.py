"""An emulated multi-node cluster on one machine: network namespaces ``<name>-n<i>`` joined by veth pairs
to a bridge in ``<name>-sw``, `tc` shaping both directions of every link. mpirun runs in node 0 and starts
its daemons in the others through `netns-agent`. Needs root, iproute2, veth, bridge, tbf (netem).
"""

import contextlib
import os
import signal
import subprocess
import time
import uuid
from dataclasses import dataclass
from pathlib import Path

PREFIX = "dlsemu"
SUBNET = "10.213.0"
MAX_NODES = 250
# How long a packet may wait in a link's queue (tbf latency), like a switch port: with deep queues acks
# waited behind data and throughput halved at random.
QUEUE_MS = 3
# Every node's TCP's, not the machine's: with BBR 2-4 of 6 allreduces over 500 Mbit/s took 1.25-1.75x the
# fastest, against 0.6% with cubic (bench/link.py).
CONGESTION_CONTROL = "cubic"
SYSCTL = Path("/proc/sys/net/ipv4")
AGENT = Path(__file__).resolve().parent / "netns-agent"


class EmulationError(RuntimeError):
    pass


def _run(*argv):
    proc = subprocess.run(list(argv), capture_output=True, text=True)
    if proc.returncode != 0:
        raise EmulationError(f"`{' '.join(argv)}` failed: {proc.stderr.strip() or proc.stdout.strip()}")
    return proc.stdout


def _ns_run(ns, *argv):
    return _run("ip", "netns", "exec", ns, *argv)


def node_cpus(nodes, cpus=None):
    """Each emulated node's CPUs: this machine's split evenly between the nodes (in turn when there are fewer)."""
    cpus = sorted(os.sched_getaffinity(0) if cpus is None else cpus)
    share = max(1, len(cpus) // nodes)
    return [",".join(str(cpus[(i * share + k) % len(cpus)]) for k in range(share)) for i in range(nodes)]


@dataclass
class Cluster:
    name: str
    nodes: int
    rate_mbit: float | None
    delay_ms: float
    cpus: list = None
    congestion_control: str = CONGESTION_CONTROL

    def __post_init__(self):
        self.cpus = self.cpus or node_cpus(self.nodes)
        if len(self.cpus) != self.nodes:
            raise EmulationError(f"{self.nodes} emulated nodes need {self.nodes} CPU sets, got {self.cpus}")

    @property
    def switch(self):
        return f"{self.name}-sw"

    @property
    def namespaces(self):
        return [f"{self.name}-n{i}" for i in range(self.nodes)]

    @property
    def hosts(self):
        return [f"{SUBNET}.{i + 1}" for i in range(self.nodes)]

    def hostfile(self, slots):
        """Open MPI hostfile text for the emulated nodes."""
        return "".join(f"{host} slots={slots}\n" for host in self.hosts)

    def launch_env(self):
        """Environment for mpirun: the agent, and the host -> namespace and CPUs map it reads."""
        return {
            "OMPI_MCA_plm_rsh_agent": str(AGENT),
            "OMPI_MCA_plm_rsh_no_tree_spawn": "1",
            "DLSCALE_NETNS_MAP": " ".join(f"{h}={ns}={c}" for h, ns, c in zip(self.hosts, self.namespaces, self.cpus)),
        }

    def wrap(self, argv):
        """argv that runs `argv` (mpirun) inside node 0, on node 0's CPUs."""
        node = self.namespaces[0]
        return ["taskset", "-c", self.cpus[0], "ip", "netns", "exec", node, "env", f"DLSCALE_NODE={node}", *argv]

    def describe(self):
        keys = ("name", "nodes", "rate_mbit", "delay_ms", "congestion_control", "hosts", "namespaces", "cpus")
        return {key: getattr(self, key) for key in keys}


def _shape(ns, dev, rate_mbit, delay_ms):
    """Rate (token bucket) and one-way delay (netem) on what `dev` in `ns` sends."""
    parent = ["root"]
    if delay_ms:
        try:
            _ns_run(ns, "tc", "qdisc", "add", "dev", dev, "root", "handle", "1:", "netem", "delay", f"{delay_ms}ms")
        except EmulationError as exc:
            raise EmulationError(
                f"a link delay needs the kernel's netem qdisc (sch_netem), which this machine "
                f"refused; set emulate.delay_ms to 0 ({exc})"
            ) from None
        parent = ["parent", "1:1"]
    if rate_mbit:
        # The bucket must hold at least one timer tick of traffic (4 ms covers HZ=250) and a GSO packet.
        burst = max(int(rate_mbit * 1e6 / 8 * 0.004), 64 * 1024)
        tbf = ["tbf", "rate", f"{rate_mbit}mbit", "burst", str(burst), "latency", f"{QUEUE_MS}ms"]
        _ns_run(ns, "tc", "qdisc", "add", "dev", dev, *parent, "handle", "10:", *tbf)


def congestion_controls():
    """The TCP congestion controls this kernel has."""
    return (SYSCTL / "tcp_available_congestion_control").read_text().split()


def _congestion_control(ns, name):
    """Make `name` the TCP congestion control of namespace `ns` (allowing it there first if need be)."""
    if name not in congestion_controls():
        raise EmulationError(
            f"TCP congestion control {name!r} is not in this kernel (it has {', '.join(congestion_controls())})"
        )
    allowed = SYSCTL / "tcp_allowed_congestion_control"
    if name not in allowed.read_text().split():
        allowed.write_text(" ".join(allowed.read_text().split() + [name]))
    _ns_run(ns, "sysctl", "-qw", f"net.ipv4.tcp_congestion_control={name}")


def up(nodes, rate_mbit=None, delay_ms=0, name=None, cpus=None, congestion_control=CONGESTION_CONTROL):
    """Create an emulated cluster of `nodes` nodes; on any error, remove what was made and raise."""
    if not 1 <= nodes <= MAX_NODES:
        raise EmulationError(f"an emulated cluster has 1 to {MAX_NODES} nodes, not {nodes}")
    if rate_mbit is not None and rate_mbit <= 0:
        raise EmulationError(f"link rate must be positive, got {rate_mbit} Mbit/s")
    if delay_ms < 0:
        raise EmulationError(f"link delay cannot be negative, got {delay_ms} ms")
    name = name or f"{PREFIX}-p{os.getpid()}-{uuid.uuid4().hex[:6]}"
    cluster = Cluster(name, nodes, rate_mbit, delay_ms, cpus, congestion_control)
    if set(cluster.namespaces + [cluster.switch]) & set(namespaces()):
        raise EmulationError(
            f"an emulated cluster named {name} exists; remove it with `python -m dlscale emulate down {name}`"
        )
    try:
        _run("ip", "netns", "add", cluster.switch)
        _run("ip", "-n", cluster.switch, "link", "add", "br0", "type", "bridge")
        _run("ip", "-n", cluster.switch, "link", "set", "br0", "up")
        for i, (ns, host) in enumerate(zip(cluster.namespaces, cluster.hosts)):
            port = f"p{i}"
            _run("ip", "netns", "add", ns)
            veth = ["type", "veth", "peer", "name", port, "netns", cluster.switch]
            _run("ip", "link", "add", "eth0", "netns", ns, *veth)
            _run("ip", "-n", cluster.switch, "link", "set", port, "master", "br0")
            _run("ip", "-n", cluster.switch, "link", "set", port, "up")
            _run("ip", "-n", ns, "addr", "add", f"{host}/24", "dev", "eth0")
            _run("ip", "-n", ns, "link", "set", "eth0", "up")
            _run("ip", "-n", ns, "link", "set", "lo", "up")
            _congestion_control(ns, congestion_control)
            _shape(ns, "eth0", rate_mbit, delay_ms)
            _shape(cluster.switch, port, rate_mbit, delay_ms)
    except BaseException:
        down(name)
        raise
    return cluster


def namespaces():
    out = subprocess.run(["ip", "netns", "list"], capture_output=True, text=True).stdout
    return [line.split()[0] for line in out.splitlines() if line.strip()]


def down(name):
    """Kill every process left in the cluster's namespaces, then delete them. Returns their names."""
    mine = [ns for ns in namespaces() if ns.startswith(f"{name}-")]
    for sig in (signal.SIGTERM, signal.SIGKILL):
        listed = [subprocess.run(["ip", "netns", "pids", ns], capture_output=True, text=True).stdout for ns in mine]
        pids = [int(p) for out in listed for p in out.split()]
        for pid in pids:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, sig)
        if pids and sig == signal.SIGTERM:
            time.sleep(1)
    for ns in mine:
        _run("ip", "netns", "del", ns)
    return mine


def clusters():
    """Names of the emulated clusters that exist."""
    return sorted({ns.rsplit("-", 1)[0] for ns in namespaces() if ns.startswith(f"{PREFIX}-")})


def remove_orphans():
    """Remove clusters made by processes that have died (a killed study cannot clean up itself)."""
    removed = []
    for name in clusters():
        tag = name.split("-")[1]
        if tag.startswith("p") and tag[1:].isdigit() and not Path(f"/proc/{tag[1:]}").exists():
            removed += down(name)
    return removed


@contextlib.contextmanager
def cluster(nodes, rate_mbit=None, delay_ms=0, cpus=None, congestion_control=CONGESTION_CONTROL):
    """An emulated cluster for the length of a `with` block, removed however the block ends."""
    remove_orphans()
    made = up(nodes, rate_mbit, delay_ms, cpus=cpus, congestion_control=congestion_control)
    try:
        yield made
    finally:
        down(made.name)


def available():
    """(True, "") when this machine can make emulated clusters, else (False, why not)."""
    if os.geteuid() != 0:
        return False, "emulated clusters need root (network namespaces, veth, tc)"
    try:
        with cluster(2, rate_mbit=100):
            pass
    except (EmulationError, FileNotFoundError) as exc:
        return False, f"this machine cannot make network namespaces with shaped links: {exc}"
    return True, ""
