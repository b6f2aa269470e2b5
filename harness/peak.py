"""The machine's matrix-multiply rate as each framework reaches it: the denominator of model FLOP
utilisation (MFU).

Per framework, in a process of its own with a rank's threads (`threads_per_rank`) and device: a
square matrix multiply (float32; float16 for mixed precision) of size N, timed REPEATS times after
WARMUP, waiting for the result each time; the rate is 2 N^3 / the median time. CPU: N = 2048;
GPU: N = 8192 (large enough for the BLAS kernels' full speed).

    python -m harness.peak OUT.csv --framework torch tensorflow mxnet --threads 1 [--device cpu|gpu]
        [--precision fp32|mixed]
"""

import argparse
import csv
import json
import math
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

WARMUP, REPEATS = 3, 10
SIZE = {"cpu": 2048, "gpu": 8192}


def _timed(run):
    for _ in range(WARMUP):
        run()
    times = []
    for _ in range(REPEATS):
        start = time.perf_counter()
        run()
        times.append(time.perf_counter() - start)
    return statistics.median(times), min(times), max(times)


def measure(framework, threads, device, precision):
    """(median, fastest, slowest) seconds of one N x N multiply in `framework`."""
    n, half = SIZE[device], precision == "mixed"
    if framework == "torch":
        import torch

        torch.set_num_threads(threads)
        dev = torch.device("cuda" if device == "gpu" else "cpu")
        a = torch.randn(n, n, device=dev, dtype=torch.float16 if half else torch.float32)

        def run():
            (a @ a).sum().item()
    elif framework == "tensorflow":
        import tensorflow as tf

        tf.config.threading.set_intra_op_parallelism_threads(threads)
        tf.config.threading.set_inter_op_parallelism_threads(threads)
        with tf.device("/GPU:0" if device == "gpu" else "/CPU:0"):
            a = tf.random.normal((n, n), dtype=tf.float16 if half else tf.float32)
            matmul = tf.function(lambda x: tf.reduce_sum(tf.matmul(x, x)))

        def run():
            matmul(a).numpy()
    else:
        import mxnet as mx

        ctx = mx.gpu(0) if device == "gpu" else mx.cpu()
        a = mx.nd.random.normal(shape=(n, n), ctx=ctx, dtype="float16" if half else "float32")

        def run():
            mx.nd.dot(a, a).sum().asscalar()

    return _timed(run)


def main(argv=None):
    ap = argparse.ArgumentParser(
        prog="python -m harness.peak", description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    ap.add_argument("out", nargs="?")
    ap.add_argument("--framework", nargs="+", default=["torch", "tensorflow", "mxnet"])
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--device", choices=["cpu", "gpu"], default="cpu")
    ap.add_argument("--precision", choices=["fp32", "mixed"], default="fp32")
    ap.add_argument("--one", action="store_true", help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    n = SIZE[args.device]
    if args.one:
        median, fastest, slowest = measure(args.framework[0], args.threads, args.device, args.precision)
        print(json.dumps({"median_s": median, "min_s": fastest, "max_s": slowest}))
        return 0
    env = {
        **os.environ,
        "OMP_NUM_THREADS": str(args.threads),
        "MKL_NUM_THREADS": str(args.threads),
        "MXNET_CPU_WORKER_NTHREADS": str(args.threads),
        "TF_ENABLE_ONEDNN_OPTS": "1",
        "TF_CPP_MIN_LOG_LEVEL": "2",
        "PYTHONPATH": str(Path(__file__).resolve().parent.parent),
    }
    if args.device == "cpu":
        env["CUDA_VISIBLE_DEVICES"] = ""
    rows = []
    for framework in args.framework:
        cmd = [
            sys.executable,
            "-m",
            "harness.peak",
            "--one",
            "--framework",
            framework,
            "--threads",
            str(args.threads),
            "--device",
            args.device,
            "--precision",
            args.precision,
        ]
        proc = subprocess.run(cmd, capture_output=True, text=True, env=env)
        lines = [ln for ln in proc.stdout.splitlines() if ln.startswith("{")]
        row = {
            "framework": framework,
            "device": args.device,
            "precision": args.precision,
            "threads": args.threads,
            "n": n,
            "matmul_flops_s": math.nan,
            "matmul_flops_s_min": math.nan,
            "matmul_flops_s_max": math.nan,
            "repeats": 0,
            "failure": "",
        }
        if proc.returncode or not lines:
            # a framework that cannot use the device (a GPU study where there is none) has no peak,
            # and its MFU is left empty; its runs fail on their own, saying why
            row["failure"] = (proc.stderr.strip().splitlines() or [f"exit code {proc.returncode}"])[-1]
            print(f"{framework}: no matrix-multiply rate ({args.device}): {row['failure']}", flush=True)
        else:
            t = json.loads(lines[-1])
            row.update(
                matmul_flops_s=2 * n**3 / t["median_s"],
                matmul_flops_s_min=2 * n**3 / t["max_s"],
                matmul_flops_s_max=2 * n**3 / t["min_s"],
                repeats=REPEATS,
            )
            print(
                f"{framework}: {row['matmul_flops_s'] / 1e9:.1f} GFLOP/s ({args.device}, {args.precision}, "
                f"{args.threads} thread(s), n={n})",
                flush=True,
            )
        rows.append(row)
    if args.out:
        Path(args.out).parent.mkdir(parents=True, exist_ok=True)
        with open(args.out, "w", newline="") as fh:
            writer = csv.DictWriter(fh, fieldnames=list(rows[0]))
            writer.writeheader()
            writer.writerows(rows)
    return 0


if __name__ == "__main__":
    sys.exit(main())
