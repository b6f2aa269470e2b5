"""A process tree's CPU time from /proc (dlscale/core/processes.py): what a rank's `cores_used` is made of."""

import json
import subprocess
import sys

from dlscale.core import processes

BUSY = "import time\nt = time.process_time()\nwhile time.process_time() - t < {s}: pass\ntime.sleep(30)"


# Metered in a fresh interpreter: the pytest process may hold children of earlier tests (a daemon, a
# server) that a meter of it would rightly count, and this test is about one known child.
METERED = """
import json, subprocess, sys, time
from dlscale.core import processes
meter = processes.CpuMeter()
meter.start()
child = subprocess.Popen([sys.executable, "-c", {busy!r}])  # started after start: counted from 0
try:
    time.sleep(0.1)
    assert child.pid in processes.descendants(meter.pid)
    deadline = time.monotonic() + 20
    while processes.cpu_seconds(child.pid) < 0.4 and time.monotonic() < deadline:
        time.sleep(0.05)
    print(json.dumps(meter.stop()))
finally:
    child.kill()
    child.wait()
"""


def test_a_child_process_that_computes_is_counted_with_its_threads_by_name():
    done = subprocess.run(
        [sys.executable, "-c", METERED.format(busy=BUSY.format(s=0.4))], capture_output=True, text=True, timeout=60
    )
    assert done.returncode == 0, done.stderr
    cpu = json.loads(done.stdout)
    assert cpu["processes"] == 2 and cpu["threads"] >= 2
    assert 0.39 <= cpu["cpu_s"] and cpu["cores_used"] == cpu["cpu_s"] / cpu["cpu_wall_s"]
    assert max(cpu["by_thread"].values()) > 0  # the busy child's main thread, by its name


def test_a_meter_never_started_measured_nothing_and_an_ended_process_reads_as_none():
    assert processes.CpuMeter().stop() == {}
    done = subprocess.run([sys.executable, "-c", "pass"])
    assert done.returncode == 0
    assert processes.cpu_seconds(2**22 + 12345) is None and processes.thread_seconds(2**22 + 12345) == {}
