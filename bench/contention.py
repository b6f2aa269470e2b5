"""Benchmark (not a test): why two ranks on one node compute slower than one.

Per framework and model, three things in rotating order, several trials, all in `phased` timing so
that each iteration's compute (forward + backward + update) is measured between waits:
- alone: one 1-rank run;
- pair: two independent 1-rank runs started together (two mpirun -np 1; no MPI between them, no
  Horovod communication): what two processes sharing the node's cores, caches and memory cost;
- ranks2: one 2-rank run (MPI and Horovod's background threads, allreduces).
Prints per configuration the median over trials of pair/alone and ranks2/alone compute time with
their spread. If ranks2 ~ pair, the slowdown is the machine's (two processes at once), not the
harness's or MPI's. Writes bench/results/contention.csv.

  .venv/bin/python bench/contention.py [--framework torch tensorflow mxnet] [--model resnet50 alexnet]
      [--batch-size 8] [--image-size 64] [--iterations 10] [--trials 5] [--allreduce-schedule sequential]
      [--env HOROVOD_CYCLE_TIME=5 ...]

With `--allreduce-schedule sequential` (the default) the 2-rank run's allreduces happen after the update's wait,
outside the compute phases, so compute is compared with compute; with `--allreduce-schedule overlap` backward
also carries the allreduces' own CPU work (fusion copies and the reduction), which is no contention
but communication. `--env` adds variables to the ranks' environment (the study's launcher.env).
"""

import argparse
import json
import statistics
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from overhead import framework_python, harness_spec, machine, study_rank_env, write_table  # noqa: E402

from dlscale.core.records import parse_file  # noqa: E402
from dlscale.core.vocabulary import records_name  # noqa: E402
from dlscale.runtime import launch, launchers  # noqa: E402
from dlscale.workloads import frameworks  # noqa: E402

KINDS = ("alone", "pair", "ranks2")
COMPUTE = ("forward_s", "backward_s", "update_s")


def compute_s(folder, ranks):
    """Mean over measured iterations of the slowest rank's forward + backward + update."""
    per_it = {}
    for rank in range(ranks):
        recs, errors = parse_file(Path(folder) / records_name(rank))
        if errors:
            sys.exit(f"{folder}: {errors[0]}")
        for r in recs:
            if r["kind"] == "step" and not r["warmup"]:
                per_it[r["iteration"]] = max(per_it.get(r["iteration"], 0), sum(r[k] for k in COMPUTE))
    return statistics.mean(per_it.values())


def start(spec, folder, ranks, env, new_session=True):
    """A run of `ranks` ranks of `spec` in `folder`, started; `new_session` False: in this process's session,
    where Linux's autogroup scheduling shares the CPUs among its threads with every other one started so,
    not among sessions (bench/sharing.py)."""
    import subprocess

    folder.mkdir(parents=True)
    (folder / "spec.json").write_text(json.dumps({**spec, "ranks_per_node": ranks, "out_dir": str(folder)}))
    argv = launchers.local_argv(
        ranks, launch.workload_command(framework_python(spec["framework"]), folder / "spec.json"), env
    )
    log = open(folder.parent / f"{folder.name}.log", "w")
    return subprocess.Popen(argv, stdout=log, stderr=subprocess.STDOUT, start_new_session=new_session)


def trial(kind, spec, out, env):
    """Compute seconds per iteration of one trial of `kind`."""
    if kind == "alone":
        procs, folders, ranks = [start(spec, out / "a", 1, env)], [out / "a"], 1
    elif kind == "pair":
        procs = [start({**spec, "seed": s}, out / f"p{s}", 1, env) for s in (0, 1)]
        folders, ranks = [out / "p0", out / "p1"], 1
    else:
        procs, folders, ranks = [start(spec, out / "r2", 2, env)], [out / "r2"], 2
    if any(p.wait() != 0 for p in procs):
        sys.exit(f"{kind} failed; see the logs in {out}")
    return statistics.mean(compute_s(f, ranks) for f in folders)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--framework", nargs="+", default=["torch", "tensorflow", "mxnet"])
    ap.add_argument("--model", nargs="+", default=["resnet50", "alexnet"])
    ap.add_argument("--batch-size", type=int, default=8)
    ap.add_argument("--image-size", type=int, default=64)
    ap.add_argument("--warmup", type=int, default=2)
    ap.add_argument("--iterations", type=int, default=10)
    ap.add_argument("--trials", type=int, default=5)
    ap.add_argument("--allreduce-schedule", default="sequential", choices=["sequential", "overlap"])
    ap.add_argument("--env", nargs="*", default=[], metavar="NAME=VALUE")
    ap.add_argument("--out", default=str(ROOT / "bench" / "results" / "contention.csv"))
    args = ap.parse_args()
    extra = dict(item.split("=", 1) for item in args.env)
    env = study_rank_env(1, **extra)
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        for framework in args.framework:
            for model in args.model:
                library = frameworks.default_library(framework)
                spec = harness_spec(
                    args,
                    framework=framework,
                    allreduce_library=library,
                    model=model,
                    allreduce_schedule=args.allreduce_schedule,
                )
                spec.update(timing="phased", threads_per_rank=1)
                got = {k: [] for k in KINDS}
                for t in range(args.trials):
                    for kind in KINDS[t % 3 :] + KINDS[: t % 3]:
                        got[kind].append(trial(kind, spec, Path(tmp) / f"{framework}_{model}_{t}_{kind}", env))
                for kind in ("pair", "ranks2"):
                    ratios = [a / b for a, b in zip(got[kind], got["alone"])]
                    rows.append(
                        {
                            "framework": framework,
                            "model": model,
                            "kind": kind,
                            "ratio_to_alone": round(statistics.median(ratios), 4),
                            "ratio_min": round(min(ratios), 4),
                            "ratio_max": round(max(ratios), 4),
                            "alone_compute_s": round(statistics.median(got["alone"]), 5),
                            "allreduce_schedule": args.allreduce_schedule,
                            "env": " ".join(args.env),
                            "trials": args.trials,
                            "batch_size": args.batch_size,
                            "image_size": args.image_size,
                            "machine": machine(),
                        }
                    )
                    r = rows[-1]
                    print(
                        f"{framework} {model} {kind}/alone compute: median {r['ratio_to_alone']:.3f} "
                        f"(min {r['ratio_min']:.3f}, max {r['ratio_max']:.3f})",
                        flush=True,
                    )
    write_table(rows, args.out)


if __name__ == "__main__":
    main()
