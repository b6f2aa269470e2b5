"""What a host is (CPU, memory, GPUs) from /proc and nvidia-smi: each rank records its host's, for the report."""

import json
import os
import platform
import shutil
import socket
import subprocess
from pathlib import Path

GPU_QUERY = "name,memory.total,driver_version"
ISA = ("avx2", "fma", "avx512f", "avx512_vnni", "avx512_bf16", "amx_tile", "asimd", "sve")  # what kernels use


def cpu(cpuinfo=None):
    """{model, sockets, cores, logical_cpus} of /proc/cpuinfo (a VM that lists no cores: its logical CPUs)."""
    text = cpuinfo if cpuinfo is not None else _read("/proc/cpuinfo")
    blocks = [dict(_fields(b)) for b in text.split("\n\n") if b.strip()]
    models = [b.get("model name") or b.get("Model") or b.get("cpu model") for b in blocks]
    sockets = {b.get("physical id") for b in blocks if "physical id" in b}
    cores = {(b.get("physical id"), b.get("core id")) for b in blocks if "core id" in b}
    return {
        "cpu_model": next((m for m in models if m), "unknown"),
        "sockets": len(sockets) or 1,
        "cores": len(cores) or len(blocks) or os.cpu_count(),
        "logical_cpus": len(blocks) or os.cpu_count(),
    }


def _os_release(text):
    """/etc/os-release's KEY=VALUE lines (shell quoting: a value in quotes may hold '=', ':' or spaces)."""
    pairs = (line.split("=", 1) for line in text.splitlines() if "=" in line and not line.lstrip().startswith("#"))
    return {key.strip(): value.strip().strip("\"'") for key, value in pairs}


def platform_facts(cpuinfo=None, lscpu=None, os_release=None):
    """What else tells hosts apart: CPU family/model/stepping, clock, ISA, kernel, OS, virtualization."""
    text = cpuinfo if cpuinfo is not None else _read("/proc/cpuinfo")
    first = dict(_fields(text.split("\n\n")[0]))
    flags = set((first.get("flags") or first.get("Features") or "").split())
    lscpu = dict(_fields(command_output(["lscpu"], 10, env={**os.environ, "LC_ALL": "C"}) if lscpu is None else lscpu))
    release = _os_release(os_release if os_release is not None else _read("/etc/os-release"))
    hypervisor = lscpu.get("Hypervisor vendor") or ("a hypervisor" if "hypervisor" in flags else None)
    kind = lscpu.get("Virtualization type")
    return {
        "cpu_family_model_stepping": "/".join(first.get(k, "?") for k in ("cpu family", "model", "stepping")),
        "cpu_mhz": round(float(first["cpu MHz"])) if first.get("cpu MHz", "").replace(".", "").isdigit() else None,
        "isa": [f for f in ISA if f in flags],
        "kernel": platform.release(),
        "os": release.get("PRETTY_NAME") or platform.system(),
        "virtualization": f"{hypervisor} ({kind or 'type not reported'})" if hypervisor else "none reported",
    }


def command_output(argv, timeout, env=None):
    """A command's standard output, or "" where it is not installed or fails."""
    if not shutil.which(argv[0]):
        return ""
    try:
        out = subprocess.run(argv, capture_output=True, text=True, timeout=timeout, env=env)
    except (OSError, subprocess.TimeoutExpired):
        return ""
    return out.stdout if out.returncode == 0 else ""


def memory_gib(meminfo=None):
    """MemTotal of /proc/meminfo's text, GiB (None where unreadable)."""
    text = meminfo if meminfo is not None else _read("/proc/meminfo")
    return next((round(int(v.split()[0]) / 2**20, 1) for k, v in _fields(text) if k == "MemTotal"), None)


def gpus(query=None):
    """[{name, memory, driver}] of nvidia-smi's CSV query (none without nvidia-smi)."""
    if query is None:
        query = command_output(["nvidia-smi", f"--query-gpu={GPU_QUERY}", "--format=csv,noheader"], 20)
    rows = [[c.strip() for c in line.split(",")] for line in query.splitlines() if line.strip()]
    return [{"name": r[0], "memory": r[1], "driver": r[2]} for r in rows if len(r) == 3]


def cpus_allowed():
    """How many CPUs this process's affinity mask lets it run on (maybe fewer than the host's)."""
    try:
        return len(os.sched_getaffinity(0))
    except (AttributeError, OSError):  # not Linux
        return os.cpu_count()


def describe():
    """This host as this process sees it: its name, CPU, the CPUs the process may use, memory, GPUs."""
    found = {"host": socket.gethostname(), **cpu(), "cpus_allowed": cpus_allowed(), **platform_facts()}
    return {**found, "memory_gib": memory_gib(), "gpus": gpus()}


def merged(old, new):
    """One host's description from two of its ranks': the newer, with the fewer CPUs allowed (the limit)."""
    if not old:
        return new
    allowed = [d["cpus_allowed"] for d in (old, new) if d.get("cpus_allowed")]
    return {**new, "cpus_allowed": min(allowed)} if allowed else new


def hosts(cells):
    """{host name: its description} from runs.csv's `hardware` cells (JSON objects; empty ones skipped); where
    runs of a host were allowed different CPU counts (bound and unbound runs), `cpus_allowed` is the range."""
    found, allowed = {}, {}
    for cell in (c for c in cells if isinstance(c, str) and c.strip()):
        for name, host in json.loads(cell).items():
            found[name] = host
            if host.get("cpus_allowed"):
                allowed.setdefault(name, set()).add(host["cpus_allowed"])
    for name, counts in allowed.items():
        found[name] = {**found[name], "cpus_allowed": [min(counts), max(counts)] if len(counts) > 1 else min(counts)}
    return found


def summary(host):
    """One line for a report: "Intel Xeon ... (1 socket, 2 cores, 2 logical CPUs), 23.4 GiB; GPU: ..."."""
    gpu = "; ".join(f"{g['name']} ({g['memory']}, driver {g['driver']})" for g in host.get("gpus") or [])
    sockets, allowed, cpus = host.get("sockets"), host.get("cpus_allowed"), host.get("logical_cpus")
    if isinstance(allowed, list):  # the runs differed (hosts)
        limit = f", {allowed[0]} to {allowed[1]} of them allowed to a rank (by run: runs.csv's hardware)"
    else:
        limit = f", {allowed} of them allowed to a rank" if allowed and cpus and allowed < cpus else ""
    line = (
        f"{host.get('cpu_model', 'unknown CPU')} ({sockets} socket{'s' if sockets != 1 else ''}, "
        f"{host.get('cores')} cores, {cpus} logical CPUs{limit}), "
        f"{host.get('memory_gib')} GiB memory; GPU: {gpu or 'none'}"
    )
    if "kernel" not in host:  # recorded before these facts were
        return line
    clock = f", {host['cpu_mhz']} MHz" if host.get("cpu_mhz") else ""
    return (
        f"{line}; CPU family/model/stepping {host['cpu_family_model_stepping']}{clock}, "
        f"{', '.join(host['isa']) or 'no AVX2'}; {host['os']}, Linux {host['kernel']}; "
        f"virtualization: {host['virtualization']}"
    )


def _read(path):
    try:
        return Path(path).read_text(errors="replace")
    except OSError:
        return ""


def _fields(text):
    """(key, value) of each "key : value" line."""
    return [tuple(p.strip() for p in line.split(":", 1)) for line in text.splitlines() if ":" in line]
