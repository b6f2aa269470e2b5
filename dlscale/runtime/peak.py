"""The machine's matrix-multiply rate as each framework reaches it: the denominator of model FLOP
utilisation (MFU).

Per framework, in a process of its own in that framework's Python (`--python FRAMEWORK=PATH`), with a
rank's threads and device: a square matrix multiply, rate 2 N^3 / the median time, and the cores it used.
On the CPU it runs again bound to `threads` CPUs (`matmul_flops_s_bound`), beside which a rate that took
more cores than it was given stands out.

    python -m dlscale.runtime.peak OUT.csv --framework torch tensorflow mxnet --threads 1 [--device cpu|gpu]
        [--precision fp32|mixed] [--size N] [--python jax=PATH]
"""

import argparse
import csv
import json
import math
import os
import subprocess
import sys
from pathlib import Path

from dlscale.core.paths import SOURCE
from dlscale.runtime import config as cfg
from dlscale.runtime.execution import execute
from dlscale.runtime.launch import thread_env
from dlscale.workloads import frameworks
from dlscale.workloads.matmul import REPEATS, SIZE


def _arguments(argv):
    ap = argparse.ArgumentParser(
        prog="python -m dlscale.runtime.peak", description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    ap.add_argument("out", nargs="?")
    ap.add_argument("--framework", nargs="+", default=list(frameworks.NAMES), choices=frameworks.NAMES)
    ap.add_argument("--threads", type=int, nargs="+", default=[1], help="each measured apart (a row each)")
    ap.add_argument("--device", choices=["cpu", "gpu"], default="cpu")
    ap.add_argument("--precision", choices=["fp32", "mixed"], default="fp32")
    ap.add_argument("--size", type=int, help="N of the N x N multiply (default: 2048 on the CPU, 8192 on a GPU)")
    python_help = "the Python a framework runs in (default: this one)"
    ap.add_argument(
        "--python", action="append", default=[], type=_framework_python, metavar="FRAMEWORK=PATH", help=python_help
    )
    return ap.parse_args(argv)


def _framework_python(text):
    """--python's FRAMEWORK=PATH as (framework, path)."""
    framework, _, path = text.partition("=")
    if framework not in frameworks.NAMES or not path:
        raise argparse.ArgumentTypeError(f"{text!r}: FRAMEWORK=PATH, FRAMEWORK one of {', '.join(frameworks.NAMES)}")
    return framework, path


def _environment(threads, device):
    """A probe process's environment: a rank's threads, and no GPU for a CPU peak."""
    env = {**os.environ, **thread_env(threads), "TF_ENABLE_ONEDNN_OPTS": "1", "TF_CPP_MIN_LOG_LEVEL": "2"}
    env["PYTHONPATH"] = str(SOURCE)
    if device == "cpu":
        env["CUDA_VISIBLE_DEVICES"] = ""
    return env


def _probe(framework, threads, args, env):
    """One framework's row of the table at `threads`, measured in a process of its own."""
    n = args.size or SIZE[args.device]
    python = dict(args.python).get(framework, sys.executable)
    cmd = [python, "-m", "dlscale.workloads.matmul", framework, str(threads), args.device, args.precision, str(n)]
    proc = subprocess.run(cmd, capture_output=True, text=True, env=env)
    lines = [ln for ln in proc.stdout.splitlines() if ln.startswith("{")]
    row = {"framework": framework, "device": args.device, "precision": args.precision, "threads": threads, "n": n}
    row |= dict.fromkeys(["matmul_flops_s", "matmul_flops_s_min", "matmul_flops_s_max"], math.nan)
    row |= {"repeats": 0, "cores_used": math.nan, "matmul_flops_s_bound": math.nan, "failure": ""}
    if proc.returncode or not lines:
        # a framework that cannot use the device (a GPU study where there is none) has no peak,
        # and its MFU is left empty; its runs fail on their own, saying why
        row["failure"] = (proc.stderr.strip().splitlines() or [f"exit code {proc.returncode}"])[-1]
        print(f"{framework}: no matrix-multiply rate ({args.device}): {row['failure']}", flush=True)
        return row
    t = json.loads(lines[-1])
    row["matmul_flops_s_bound"] = _bound(cmd, env, threads, n) if args.device == "cpu" else math.nan
    flop = 2 * n**3
    row |= {"matmul_flops_s": flop / t["median_s"], "matmul_flops_s_min": flop / t["max_s"]}
    row |= {"matmul_flops_s_max": flop / t["min_s"], "repeats": REPEATS, "cores_used": t["cores_used"]}
    print(
        f"{framework}: {row['matmul_flops_s'] / 1e9:.1f} GFLOP/s ({args.device}, {args.precision}, "
        f"{threads} thread(s), n={n}, {t['cores_used']:.2f} cores used)",
        flush=True,
    )
    return row


def _bound(cmd, env, threads, n):
    """The probe's rate bound to `threads` of the CPUs this process may use (NaN where fewer, or it fails)."""
    cpus = sorted(os.sched_getaffinity(0))[:threads]
    if len(cpus) < threads:
        return math.nan
    proc = subprocess.run(
        cmd, capture_output=True, text=True, env=env, preexec_fn=lambda: os.sched_setaffinity(0, cpus)
    )
    lines = [ln for ln in proc.stdout.splitlines() if ln.startswith("{")]
    return 2 * n**3 / json.loads(lines[-1])["median_s"] if proc.returncode == 0 and lines else math.nan


def main(argv=None):
    args = _arguments(argv)
    rows = [
        _probe(framework, threads, args, _environment(threads, args.device))
        for threads in args.threads
        for framework in args.framework
    ]
    if args.out:
        Path(args.out).parent.mkdir(parents=True, exist_ok=True)
        with open(args.out, "w", newline="") as fh:
            writer = csv.DictWriter(fh, fieldnames=list(rows[0]))
            writer.writeheader()
            writer.writerows(rows)
    return 0


def rule_settings(config):
    """The config values the peak measurement depends on."""
    return {
        "framework": list(config["framework"]),
        "threads_per_rank": cfg.threads(config),
        "device": config.get("device", "cpu"),
        "precision": config.get("precision", "fp32"),
        # only where set: a study made before the key existed keeps its peak.csv
        **({"size": config["matmul_size"]} if config.get("matmul_size") else {}),
    }


def rule(settings, python, out_path, log_path, apart=None):
    """The `peak` rule: `main` in `python` (a framework's own in `apart`, {framework: record}) with
    `rule_settings`' `settings`, the rule's params so that a change remakes peak.csv."""
    argv = [python, "-m", "dlscale.runtime.peak", str(Path(out_path).resolve()), "--framework", *settings["framework"]]
    argv += ["--threads", *map(str, settings["threads_per_rank"]), "--device", settings["device"]]
    argv += ["--precision", settings["precision"]] + (["--size", str(settings["size"])] if settings.get("size") else [])
    argv += [f"--python={fw}={record['python']}" for fw, record in (apart or {}).items()]
    Path(log_path).write_text("")
    rc, _ = execute(argv, log_path, None, {**os.environ, "PYTHONPATH": str(SOURCE)})
    if rc:
        raise RuntimeError(f"measuring the matrix-multiply peak failed (log: {log_path})")


if __name__ == "__main__":
    sys.exit(main())
