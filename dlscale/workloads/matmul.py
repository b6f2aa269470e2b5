"""`python -m dlscale.workloads.matmul FRAMEWORK THREADS DEVICE PRECISION [N]`: the peak rate's probe, in
any Python the framework runs in. Prints {"median_s", "min_s", "max_s", "cores_used"} of one N x N multiply
(float16 if mixed), timed REPEATS times after WARMUP; `cores_used` shows a rate that took more than THREADS."""

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
    """(median, fastest, slowest) seconds of one n x n multiply in `framework`, and the cores used."""
    probe = frameworks.module(framework, "probe")
    return _timed(probe.matmul(n or SIZE[device], threads, device, precision == "mixed"))


def main(argv=None):
    framework, threads, device, precision, *n = sys.argv[1:] if argv is None else argv
    median, fastest, slowest, cores = measure(framework, int(threads), device, precision, int(n[0]) if n else None)
    print(json.dumps({"median_s": median, "min_s": fastest, "max_s": slowest, "cores_used": cores}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
