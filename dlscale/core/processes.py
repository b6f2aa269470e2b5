"""Processes in Linux's /proc: who started whom, the CPU a tree used (so `threads_per_rank` is checked, not assumed)."""

import collections
import os
import re
import time
from pathlib import Path

TICK_S = 1 / os.sysconf("SC_CLK_TCK")  # /proc's CPU times are in clock ticks
# Cores a rank may use beyond its compute threads and loader workers (progress threads, the interpreter):
# measured 2026-11-27 at 1 thread and 1 loader worker, PyTorch 1.09, TensorFlow 1.10, MXNet 1.05 cores.
CORES_ALLOWANCE = 0.2
BUSIEST = 8  # threads by name a rank's record lists with the cores each used


def _fields(pid):
    """/proc/PID/stat's fields after the command's name: [state, ppid, ...] (proc(5)'s field N at N - 3)."""
    return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()


def started_at(pid="self"):
    """When process `pid` started, in seconds since the epoch (to /proc's clock tick, 10 ms)."""
    since_boot = int(_fields(pid)[19]) * TICK_S
    uptime = float(Path("/proc/uptime").read_text().split()[0])
    return time.time() - uptime + since_boot


def children():
    """{parent pid: [child pids]} of every process now alive."""
    table = {}
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            ppid = int(_fields(stat.parent.name)[1])
        except (OSError, IndexError, ValueError):
            continue  # a process that ended while the table was read
        table.setdefault(ppid, []).append(int(stat.parent.name))
    return table


def descendants(pid, table=None):
    """Every live process below `pid` (children, their children, ...)."""
    table = children() if table is None else table
    found, todo = [], list(table.get(pid, []))
    while todo:
        child = todo.pop()
        found.append(child)
        todo += table.get(child, [])
    return found


def cpu_seconds(pid):
    """User + system CPU seconds of `pid` (all its threads); None for a process that has ended."""
    try:
        fields = _fields(pid)
    except OSError:
        return None
    return (int(fields[11]) + int(fields[12])) * TICK_S  # utime, stime (proc(5) fields 14, 15)


def thread_seconds(pid):
    """{thread name less trailing numbers (a pool's add up): CPU seconds} of `pid`'s threads now."""
    out = {}
    for task in Path(f"/proc/{pid}/task").glob("[0-9]*"):
        try:
            stat = (task / "stat").read_text()  # "tid (name) state ...": the name and the times in one read
            name = re.sub(r"[\d_:-]+$", "", stat[stat.index("(") + 1 : stat.rindex(")")]) or "?"
            fields = stat.rsplit(")", 1)[1].split()
        except (OSError, IndexError, ValueError):
            continue  # a thread that ended while it was read
        out[name] = out.get(name, 0.0) + (int(fields[11]) + int(fields[12])) * TICK_S
    return out


def threads(pid):
    """Threads of `pid` now (0 for a process that has ended)."""
    try:
        return len(os.listdir(f"/proc/{pid}/task"))
    except OSError:
        return 0


class CpuMeter:
    """The cores a process tree used between `start()` and `stop()` (one that ends in between: not counted)."""

    def __init__(self, pid=None):
        self.pid = os.getpid() if pid is None else pid
        self.begin = None

    def _named(self, pids):
        """{thread name: CPU seconds} over the process tree (a loader's worker processes by their names)."""
        out = collections.Counter()
        for pid in pids:
            out.update(thread_seconds(pid))
        return out

    def _now(self):
        seconds = {p: cpu_seconds(p) for p in descendants(self.pid)}
        # this process to the nanosecond (/proc's 10 ms ticks: a short loop would read a tick more or less)
        seconds[self.pid] = time.process_time() if self.pid == os.getpid() else cpu_seconds(self.pid)
        return time.perf_counter(), {p: s for p, s in seconds.items() if s is not None}, self._named(seconds)

    def start(self):
        self.begin = self._now()

    def stop(self):
        """Since `start()`: the tree's CPU seconds, wall time, their ratio, processes, threads, busiest threads."""
        if self.begin is None:  # nothing was measured
            return {}
        (t0, before, named_before), (t1, after, named) = self.begin, self._now()
        cpu = sum(s - before.get(p, 0.0) for p, s in after.items())
        wall = t1 - t0
        busiest = sorted(((s - named_before.get(n, 0.0), n) for n, s in named.items()), reverse=True)[:BUSIEST]
        return {
            "cpu_s": cpu,
            "cpu_wall_s": wall,
            "cores_used": cpu / wall if wall > 0 else None,
            "processes": len(after),
            "threads": sum(threads(p) for p in after),
            # where the cores went: the busiest threads by name, cores each (10 ms ticks: rough on short loops)
            "by_thread": {n: round(c / wall, 3) for c, n in busiest if wall > 0 and c > 0},
        }
