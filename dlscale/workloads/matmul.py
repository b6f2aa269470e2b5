"""One framework's square matrix multiply, timed in a process of its own, in the framework's own
Python: what dlscale/runtime/peak.py measures each framework's peak rate with. It imports nothing of
the study but the framework's probe (its package's probe.py), so that it runs in any Python a
framework runs in (its own environment, a user's).

    python -m dlscale.workloads.matmul FRAMEWORK THREADS DEVICE PRECISION [N]

prints {"median_s", "min_s", "max_s", "cores_used"} of one N x N multiply (float32; float16 for mixed
precision), timed REPEATS times after WARMUP, waiting for the result each time. N: the study's
`matmul_size`, by default 2048 on the CPU and 8192 on a GPU (large enough for the BLAS kernels' full
speed). `cores_used`: the process's CPU time (all its threads) over the timed multiplies' wall time,
so a rate that took more cores than THREADS shows it.
"""

import json
import resource
import statistics
import sys
import time

from dlscale.workloads import frameworks

WARMUP, REPEATS = 3, 10
SIZE = {"cpu": 2048, "gpu": 8192}


def _cpu_s():
    usage = resource.getrusage(resource.RUSAGE_SELF)  # every thread of the process
    return usage.ru_utime + usage.ru_stime


def _timed(run):
    for _ in range(WARMUP):
        run()
    times, cpu = [], _cpu_s()
    for _ in range(REPEATS):
        start = time.perf_counter()
        run()
        times.append(time.perf_counter() - start)
    return statistics.median(times), min(times), max(times), (_cpu_s() - cpu) / sum(times)


def measure(framework, threads, device, precision, n=None):
    """(median, fastest, slowest) seconds of one n x n multiply (the device's SIZE by default) in
    `framework` (its probe.py), and the cores the timed multiplies used."""
    probe = frameworks.module(framework, "probe")
    return _timed(probe.matmul(n or SIZE[device], threads, device, precision == "mixed"))


def main(argv=None):
    framework, threads, device, precision, *n = sys.argv[1:] if argv is None else argv
    median, fastest, slowest, cores = measure(framework, int(threads), device, precision, int(n[0]) if n else None)
    print(json.dumps({"median_s": median, "min_s": fastest, "max_s": slowest, "cores_used": cores}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
