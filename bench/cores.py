"""Benchmark (not a test): the cores each framework really uses at a given `threads_per_rank`, in its
matrix-multiply probe (the MFU denominator: dlscale/workloads/matmul.py) and in a 1-rank training run
(the rank's processes' CPU time over its measured iterations: dlscale/core/processes.py), with the
probe's GFLOP/s and the run's images/s. Trials rotate the frameworks' order; each cell reports the
median and the spread. With --before REV, the training runs also run with the harness at REV (a git
worktree; its ranks record no cores before the measurement existed, their throughput is the
"before"), alternating with this checkout's in each trial.

  .venv/bin/python bench/cores.py [--framework torch tensorflow mxnet jax] [--threads 1 2]
      [--model alexnet] [--trials 3] [--before eb6ba3b] [--out bench/results/cores.csv]

On a GPU node without an MPI launcher (docs/guides/gpus.md), one rank runs without one:

  python3 bench/cores.py --framework torch --library native --device gpu --launcher direct
      --python python3 --model resnet50 --batch-size 64 --image-size 224 --threads 1 4
      --out bench/results/cores-gpu.csv
"""

import argparse
import datetime
import json
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from overhead import framework_python, harness_spec, machine, write_table  # noqa: E402

from dlscale.core.records import parse_file  # noqa: E402
from dlscale.runtime import config as cfg  # noqa: E402
from dlscale.runtime import execution, launch, peak  # noqa: E402
from dlscale.workloads import frameworks  # noqa: E402


def probe(framework, threads, device="cpu", python=None):
    """(cores used, GFLOP/s) of the framework's 2048^2 matmul probe at `threads`."""
    python = framework_python(framework, python)
    cmd = [python, "-m", "dlscale.workloads.matmul", framework, str(threads), device, "fp32"]
    proc = subprocess.run(cmd, capture_output=True, text=True, env=peak._environment(threads, device), timeout=600)
    if proc.returncode:
        sys.exit(f"{framework} probe failed: {proc.stderr[-2000:]}")
    t = json.loads(proc.stdout.strip().splitlines()[-1])
    return t["cores_used"], 2 * 2048**3 / t["median_s"] / 1e9


def train(framework, threads, args, folder, checkout):
    """(cores used or None, images/s) of a 1-rank run of `checkout`'s harness (synthetic data, no loader)."""
    folder.mkdir(parents=True)
    overlay = {
        "results": str(folder / "results"),
        "logs": str(folder / "logs"),
        "data": {"kind": "synthetic"},
        "loader_workers": [0],
        "samples": None,
        "iterations": args.iterations,
        "warmup": 3,
        "profile_iterations": 0,
        "image_size": 64,
    }
    (folder / "overlay.yaml").write_text(yaml.safe_dump(overlay))
    run = [f"framework={framework}", f"model={args.model}", f"threads_per_rank={threads}", "ranks_per_node=1"]
    env = {**os.environ, "PYTHONPATH": str(checkout)}  # that checkout's harness, in its ranks too
    cmd = [sys.executable, "-m", "dlscale", "launch", str(folder / "overlay.yaml"), *run]
    proc = subprocess.run(cmd, capture_output=True, text=True, cwd=checkout, env=env, timeout=900)
    records = list((folder / "results").rglob("rank0.jsonl"))
    if proc.returncode or not records:
        sys.exit(f"{framework} run failed ({checkout}): {proc.stdout[-1500:]} {proc.stderr[-1500:]}")
    return _measured(records[0])


def train_direct(framework, threads, args, folder):
    """(cores used, images/s) of one rank of this checkout's harness run without a launcher (a GPU
    node with no MPI: Horovod's Gloo controller at size 1, or the framework's own library)."""
    folder.mkdir(parents=True)
    shape = argparse.Namespace(**{**vars(args), "threads": threads, "layout": "best", "precision": "fp32", "warmup": 3})
    library = args.library or frameworks.default_library(framework)
    spec = {**harness_spec(shape), "framework": framework, "allreduce_library": library, "ranks_per_node": 1}
    (folder / "spec.json").write_text(json.dumps({**spec, "timing": "phased", "out_dir": str(folder)}))
    env = {**os.environ, **launch.rank_env(cfg.JobPlan(threads_per_rank=threads))}
    argv = launch.workload_command(framework_python(framework, args.python), folder / "spec.json")
    rc, _ = execution.execute(argv, folder / "rank.log", timeout_s=900, env=env)
    if rc:
        sys.exit(f"{framework} run failed: {(folder / 'rank.log').read_text()[-3000:]}")
    return _measured(folder / "rank0.jsonl")


def _measured(path):
    """(cores used or None, images/s) from a rank's records: its end record's CPU meter and its
    measured, untraced iterations' mean time."""
    recs, _ = parse_file(path)
    times = [r["wall_s"] for r in recs if r["kind"] == "step" and not r["warmup"] and not r.get("profiled")]
    end = next(r for r in recs if r["kind"] == "end")
    batch = recs[0]["batch_size"]
    return (end.get("cpu") or {}).get("cores_used"), batch / statistics.mean(times)


def _cell(values):
    values = [v for v in values if v is not None]
    if not values:
        return "", "", ""
    return round(statistics.median(values), 3), round(min(values), 3), round(max(values), 3)


def arguments(argv):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--framework", nargs="+", default=list(frameworks.NAMES))
    ap.add_argument("--threads", type=int, nargs="+", default=[1, 2])
    ap.add_argument("--model", default="alexnet")
    ap.add_argument("--iterations", type=int, default=20)
    ap.add_argument("--trials", type=int, default=3)
    ap.add_argument("--before", help="a git revision whose harness's 1-rank runs are measured beside (1 thread)")
    ap.add_argument("--device", default="cpu", choices=["cpu", "gpu"])
    ap.add_argument("--launcher", default="mpirun", choices=["mpirun", "direct"], help="direct: one rank, no MPI")
    ap.add_argument("--library", help="the communication library (default: the framework's own default)")
    ap.add_argument("--python", help="with --launcher direct: the Python that has the framework (a GPU node's)")
    ap.add_argument("--batch-size", type=int, default=8, help="with --launcher direct (else the study's)")
    ap.add_argument("--image-size", type=int, default=64)
    ap.add_argument("--out", default=str(ROOT / "bench" / "results" / "cores.csv"))
    args = ap.parse_args(argv)
    if args.launcher == "mpirun" and (args.device == "gpu" or args.library):
        ap.error("--device gpu and --library are measured with --launcher direct")
    if args.python and args.launcher != "direct":
        ap.error("--python is for --launcher direct (a study's runs use the framework's own environment)")
    if args.before and args.launcher == "direct":
        ap.error("--before runs the earlier harness through its launcher: not with --launcher direct")
    return args


def measure(args, before):
    """{(framework, kind, threads, code): [(cores, rate)] over trials}, frameworks rotated each trial."""
    got = {}
    with tempfile.TemporaryDirectory() as tmp:
        for trial in range(args.trials):
            shift = trial % len(args.framework)
            for fw in args.framework[shift:] + args.framework[:shift]:
                for threads in args.threads:
                    peak_run = probe(fw, threads, args.device, args.python)
                    got.setdefault((fw, "probe", threads, "after"), []).append(peak_run)
                    codes = [("after", ROOT)] + ([("before", before)] if before and threads == 1 else [])
                    for code, checkout in codes if trial % 2 == 0 else codes[::-1]:
                        where = Path(tmp) / f"{fw}-{threads}-{code}-{trial}"
                        run = train_direct(fw, threads, args, where) if args.launcher == "direct" else None
                        got.setdefault((fw, "training", threads, code), []).append(
                            run or train(fw, threads, args, where, checkout)
                        )
                        print(fw, threads, code, got[(fw, "training", threads, code)][-1], flush=True)
    return got


def main(argv=None):
    args = arguments(argv)
    before = None
    if args.before:
        before = Path(tempfile.mkdtemp()) / "before"
        subprocess.run(["git", "-C", str(ROOT), "worktree", "add", "--detach", str(before), args.before], check=True)
    try:
        got = measure(args, before)
    finally:
        if before:
            subprocess.run(["git", "-C", str(ROOT), "worktree", "remove", "--force", str(before)], check=False)
    rev = subprocess.run(["git", "-C", str(ROOT), "rev-parse", "--short", "HEAD"], capture_output=True, text=True)
    command = " ".join([Path(sys.executable).name, "bench/cores.py", *(argv if argv is not None else sys.argv[1:])])
    rows = []
    for (fw, kind, threads, code), values in got.items():
        cores, cores_min, cores_max = _cell([c for c, _ in values])
        rate, rate_min, rate_max = _cell([r for _, r in values])
        rows.append(
            {
                "framework": fw,
                "kind": kind,
                "threads": threads,
                "code": f"{code} ({args.before if code == 'before' else rev.stdout.strip()})",
                "model": args.model if kind == "training" else "matmul 2048",
                "cores_used": cores,
                "cores_min": cores_min,
                "cores_max": cores_max,
                "rate": rate,
                "rate_min": rate_min,
                "rate_max": rate_max,
                "rate_unit": "img/s" if kind == "training" else "GFLOP/s",
                "trials": len(values),
                "machine": machine(args.device),
                "date": datetime.date.today().isoformat(),
                "command": command,
            }
        )
        print(rows[-1])
    write_table(sorted(rows, key=lambda r: (r["framework"], r["kind"], r["threads"], r["code"])), args.out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
