"""Benchmark (not a test): does the harness's timing change the speed of what it times?

For each framework, communication library and rank count, runs three things through the same mpirun
with the same model, batch, input size, threads, layout and data: a bare training loop of that
framework (bench/bare_<framework>.py: no phases, syncs or records; through Horovod or the
framework's own library, as the harness's run), the harness in `native` timing, and the
harness in `phased` timing. Each trial runs all three in a rotating order (so none always goes
first), timed end to end by the loop's own clock over the measured iterations (the harness's
throughput is what it reports: ranks x batch / mean iteration time of the slowest rank; the bare
loop's is ranks x batch x iterations / elapsed). Prints per framework and ranks the median over
trials of the paired ratios native/bare and phased/bare with their spread (min-max) and the 95% interval of
that median (order statistics, distribution-free: a trial's ratio spreads by +-15% on a shared VM),
and says whether the interval places the median at or above the target (`met`), below it
(`missed`), or holds the target (`undecided`: the trials cannot tell), and writes
bench/results/overhead.csv (replacing its rows of the same framework, library, ranks, device and
precision; keeping the others). Target: native/bare >= 0.99.

  .venv/bin/python bench/overhead.py [--framework torch tensorflow mxnet jax] [--library horovod native] [--ranks 1 2]
      [--model resnet50] [--batch-size 8] [--image-size 64] [--iterations 20] [--trials 9]
      [--device cpu|gpu] [--precision fp32|mixed] [--launcher mpirun|direct [--python PYTHON]]
      [--out bench/results/overhead.csv]
"""

import argparse
import csv
import json
import math
import os
import platform
import statistics
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from dlscale.core.records import parse_file  # noqa: E402
from dlscale.core.samples import median_interval  # noqa: E402
from dlscale.core.vocabulary import HOSTS_ENV, records_name  # noqa: E402
from dlscale.environment import build  # noqa: E402
from dlscale.runtime import config as cfg  # noqa: E402
from dlscale.runtime import execution, launch, launchers  # noqa: E402
from dlscale.workloads import frameworks  # noqa: E402
from dlscale.workloads.devices import nvidia_smi_name  # noqa: E402

KINDS = ("bare", "native", "phased")
TARGET = 0.99  # native/bare


def verdict(ratios, target=TARGET):
    """(median, lower, upper, verdict) of a timing's paired ratios to the bare loop: the median with
    its 95% order-statistics interval, and whether that interval lies at or above `target` ("met"),
    below it ("missed") or holds it ("undecided"); with fewer than 6 trials it has no interval."""
    median, lo, hi = median_interval(ratios)
    if math.isnan(lo):  # too few trials for a 95% interval of a median
        return median, lo, hi, f"too few trials ({len(ratios)}) for an interval"
    return median, lo, hi, "met" if lo >= target else "missed" if hi < target else "undecided"


def machine(device="cpu"):
    cores = os.cpu_count()
    gpu = f", {nvidia_smi_name(0)}" if device == "gpu" else ""
    return f"{platform.node() or 'host'}: {cores} cores{gpu}, {platform.machine()}, {platform.platform(terse=True)}"


def write_table(rows, path):
    """A benchmark's table (bench/results/<name>.csv), one row per dict."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "w", newline="") as fh:
        writer = csv.DictWriter(fh, fieldnames=list(rows[0]))
        writer.writeheader()
        writer.writerows(rows)
    print(f"wrote {path}")


def append_table(rows, path, columns, upgrade=lambda row: row):
    """The table at `path` with `rows` after its earlier rows (each passed through `upgrade`, for names a
    column had before), every row under `columns` in that order, lines ending in \\n."""
    path = Path(path)
    old = [upgrade(r) for r in csv.DictReader(open(path))] if path.is_file() else []
    with open(path, "w", newline="") as fh:
        writer = csv.DictWriter(fh, fieldnames=columns, lineterminator="\n")
        writer.writeheader()
        writer.writerows([{k: r.get(k, "") for k in columns} for r in old + rows])
    print(f"wrote {path}")


ROW_KEY = ("framework", "allreduce_library", "ranks", "timing", "model", "device", "precision")


def merge_table(rows, path, key=ROW_KEY):
    """The table at `path` with `rows` in place of its rows of the same `key` (rows written before
    the table had a allreduce_library column are their framework's default library's)."""
    path = Path(path)
    old = list(csv.DictReader(open(path))) if path.is_file() else []
    for r in old:
        r.setdefault("allreduce_library", frameworks.default_library(r["framework"]))
    new = {tuple(str(r[k]) for k in key) for r in rows}
    kept = [r for r in old if tuple(str(r[k]) for k in key) not in new]
    return [{k: r.get(k, "") for k in rows[0]} for r in kept] + rows


def throughput(kind, out, spec, ranks, records=None):
    """Images/s of one finished run: the bare loop's printed figure (out/<kind>.log) or the
    harness's records (in `records`, by default out/<kind>)."""
    log = out / f"{kind}.log"
    folder = Path(records) if records else out / kind
    if kind == "bare":
        line = [ln for ln in log.read_text().splitlines() if ln.startswith("{")][-1]
        return json.loads(line)["throughput_img_per_s"]
    steps = {}
    for rank in range(ranks):
        recs, errors = parse_file(folder / records_name(rank))
        if errors:
            sys.exit(f"{kind}: {errors[0]}")
        for r in recs:
            if r["kind"] == "step" and not r["warmup"] and not r["profiled"]:
                steps[r["iteration"]] = max(steps.get(r["iteration"], 0), r["wall_s"])
    return ranks * spec["batch_size"] / statistics.mean(steps.values())


def framework_python(framework, python=None):
    """The Python a framework's runs use: `python` where given (a node's own, which has the framework:
    nothing is built there), else as in a study: its own environment's (built once), else this one (the
    workload environment's: the cuda variant's Horovod frameworks)."""
    return python or (build.own_record(framework) or {"python": sys.executable})["python"]


def harness_spec(args, **overrides):
    """The spec of one rank of the harness on synthetic data (no loader, no traced iterations), from
    the benchmark's --model, --batch-size, --image-size, --warmup and --iterations and, where it has
    them, --threads, --layout, --precision and --device (else 1, best, fp32, cpu); `overrides` last
    (each benchmark's own: its timing, allreduce schedule, framework)."""
    return {
        "model": args.model,
        "allreduce_schedule": "overlap",
        "layout": getattr(args, "layout", "best"),
        "nodes": 1,
        "batch_size": args.batch_size,
        "image_size": args.image_size,
        "classes": 1000,
        "threads_per_rank": getattr(args, "threads", 1),
        "precision": getattr(args, "precision", "fp32"),
        "device": getattr(args, "device", "cpu"),
        "repeat": 0,
        "loader_workers": 0,
        "data": {"kind": "synthetic"},
        "warmup": args.warmup,
        "iterations": args.iterations,
        "profile_iterations": 0,
        "autotune": True,
        "tf32": False,
        "lr": 0.01,
        "momentum": 0.9,
        "seed": 0,
        **overrides,
    }


def run_trial(framework, ranks, spec, env, tmp, trial, how):
    """One trial of bare, native and phased; `how` (Python, direct): the rank's Python
    (`framework_python`) and whether it starts without a launcher."""
    python, direct = how
    out = Path(tmp) / f"{framework}_{spec['allreduce_library']}_r{ranks}_t{trial}"
    out.mkdir()
    order = KINDS[trial % 3 :] + KINDS[: trial % 3]  # rotate who goes first
    result = {}
    for kind in order:
        folder = out / kind
        folder.mkdir()
        spec_path = folder / "spec.json"
        timing = kind if kind != "bare" else "native"
        spec_path.write_text(
            json.dumps(
                {**spec, "framework": framework, "ranks_per_node": ranks, "timing": timing, "out_dir": str(folder)}
            )
        )
        script = (
            [python, str(ROOT / "bench" / f"bare_{framework}.py"), str(spec_path)]
            if kind == "bare"
            else launch.workload_command(python, spec_path)
        )
        if direct:  # one rank without a launcher (Horovod's Gloo controller, size 1)
            argv, proc_env = (
                script,
                {
                    **os.environ,
                    **env,
                    "PYTHONPATH": os.pathsep.join(filter(None, [env["PYTHONPATH"], os.environ.get("PYTHONPATH")])),
                },
            )
        else:
            argv, proc_env = (
                launchers.local_argv(ranks, script, env),
                None,
            )
        rc, _ = execution.execute(argv, out / f"{kind}.log", timeout_s=1800, env=proc_env)
        if rc != 0:
            sys.exit(
                f"{framework} {kind} ({ranks} ranks) failed; see its log:\n{(out / f'{kind}.log').read_text()[-3000:]}"
            )
        result[kind] = throughput(kind, out, spec, ranks)
    return result, order


def study_rank_env(threads, **extra):
    """The default study's rank environment at `threads` threads: its math settings and its launcher's
    environment (config/config.yaml: MPI yielding when idle), with `extra` besides."""
    launcher = cfg.layered()["launcher"]
    return launch.rank_env(cfg.JobPlan(threads, {**launcher, "env": {**launcher.get("env", {}), **extra}}))


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--framework", nargs="+", default=list(frameworks.NAMES), choices=frameworks.NAMES)
    ap.add_argument(
        "--library",
        nargs="+",
        default=list(frameworks.LIBRARIES),
        choices=frameworks.LIBRARIES,
        help="communication libraries, each run for the frameworks that have it",
    )
    ap.add_argument("--ranks", nargs="+", type=int, default=[1, 2])
    ap.add_argument("--model", default="resnet50")
    ap.add_argument("--batch-size", type=int, default=8)
    ap.add_argument("--image-size", type=int, default=64)
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--layout", default="best")
    ap.add_argument("--warmup", type=int, default=3)
    ap.add_argument("--iterations", type=int, default=20)
    ap.add_argument(
        "--trials",
        type=int,
        default=9,
        help="a multiple of 3: each of bare, native and phased goes first, second and last equally often",
    )
    ap.add_argument("--device", default="cpu", choices=["cpu", "gpu"])
    ap.add_argument("--precision", default="fp32", choices=["fp32", "mixed"])
    ap.add_argument(
        "--launcher",
        default="mpirun",
        choices=["mpirun", "direct"],
        help="direct: one rank started without mpirun (a GPU node with no MPI)",
    )
    ap.add_argument("--python", help="with --launcher direct: the Python that has the framework (a GPU node's)")
    ap.add_argument("--out", default=str(ROOT / "bench" / "results" / "overhead.csv"))
    args = ap.parse_args()
    if args.python and args.launcher != "direct":
        ap.error("--python is for --launcher direct (a study's runs use the framework's own environment)")
    if args.launcher == "direct" and args.ranks != [1]:
        ap.error("--launcher direct runs one rank: give --ranks 1")

    spec = harness_spec(args)
    env = study_rank_env(args.threads)
    env[HOSTS_ENV] = "localhost"  # where a library that meets at rank 0 finds it, as the launcher says
    rows = []
    pairs = [(f, lib) for f in args.framework for lib in args.library if not frameworks.not_built(f, lib)]
    with tempfile.TemporaryDirectory() as tmp:
        for framework, library in pairs:
            for ranks in args.ranks:
                trials = []
                how = (framework_python(framework, args.python), args.launcher == "direct")
                for trial in range(args.trials):
                    result, order = run_trial(
                        framework, ranks, {**spec, "allreduce_library": library}, env, tmp, trial, how
                    )
                    trials.append(result)
                    print(
                        f"{framework} {library} {ranks} rank(s) trial {trial} ({' > '.join(order)}): "
                        + ", ".join(f"{k} {result[k]:.2f} img/s" for k in KINDS),
                        flush=True,
                    )
                for timing in ("native", "phased"):
                    ratios = [t[timing] / t["bare"] for t in trials]
                    median, lo, hi, said = verdict(ratios)
                    rows.append(
                        {
                            "framework": framework,
                            "allreduce_library": library,
                            "ranks": ranks,
                            "timing": timing,
                            "ratio": round(median, 4),
                            "ratio_min": round(min(ratios), 4),
                            "ratio_max": round(max(ratios), 4),
                            "trials": len(trials),
                            "ratio_ci_low": "" if math.isnan(lo) else round(lo, 4),
                            "ratio_ci_high": "" if math.isnan(hi) else round(hi, 4),
                            "target": said if timing == "native" else "",
                            "iterations": args.iterations,
                            "harness_img_per_s": round(statistics.median(t[timing] for t in trials), 3),
                            "bare_img_per_s": round(statistics.median(t["bare"] for t in trials), 3),
                            "model": args.model,
                            "batch_size": args.batch_size,
                            "image_size": args.image_size,
                            "device": args.device,
                            "precision": args.precision,
                            "machine": machine(args.device),
                        }
                    )
                    r = rows[-1]
                    print(
                        f"  {framework} {library} {ranks} rank(s) {timing}/bare: median {r['ratio']:.3f} "
                        f"(min {r['ratio_min']:.3f}, max {r['ratio_max']:.3f}, {r['trials']} paired trials; "
                        f"95% interval {lo:.3f}-{hi:.3f}" + (f"; target {TARGET}: {said})" if r["target"] else ")"),
                        flush=True,
                    )
    write_table(merge_table(rows, args.out), args.out)


if __name__ == "__main__":
    main()
