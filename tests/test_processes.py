"""A process tree's CPU time from /proc (dlscale/core/processes.py): what a rank's `cores_used` is made of."""

import subprocess
import sys
import time

from dlscale.core import processes

BUSY = "import time\nt = time.process_time()\nwhile time.process_time() - t < {s}: pass\ntime.sleep(30)"


def test_a_child_process_that_computes_is_counted_with_its_threads_by_name():
    meter = processes.CpuMeter()
    meter.start()
    child = subprocess.Popen([sys.executable, "-c", BUSY.format(s=0.4)])  # started after start: counted from 0
    try:
        time.sleep(0.1)
        assert child.pid in processes.descendants(meter.pid)
        deadline = time.monotonic() + 20
        while processes.cpu_seconds(child.pid) < 0.4 and time.monotonic() < deadline:
            time.sleep(0.05)
        cpu = meter.stop()
    finally:
        child.kill()
        child.wait()
    assert cpu["processes"] == 2 and cpu["threads"] >= 2
    assert 0.39 <= cpu["cpu_s"] and cpu["cores_used"] == cpu["cpu_s"] / cpu["cpu_wall_s"]
    assert max(cpu["by_thread"].values()) > 0  # the busy child's main thread, by its name


def test_a_meter_never_started_measured_nothing_and_an_ended_process_reads_as_none():
    assert processes.CpuMeter().stop() == {}
    done = subprocess.run([sys.executable, "-c", "pass"])
    assert done.returncode == 0
    assert processes.cpu_seconds(2**22 + 12345) is None and processes.thread_seconds(2**22 + 12345) == {}
