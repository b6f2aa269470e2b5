"""Benchmark (not a test): what each framework's iteration is made of at 2 ranks, from its traces.

For every framework and comm mode, one 2-rank run through the harness in native timing (the
framework's own step, one wait per iteration) with its traced iterations, whose phases are derived
from each rank's merged trace (analysis/trace.py: the framework's profiler events and Horovod's
timeline, or JAX's own collectives in its profile). Per framework and mode it writes the median over
the traced iterations of both ranks of: the iteration, forward, backward, update, exposed
communication (comm), all communication (comm_total), the part of it during computation (overlap)
and overlap / comm_total: whether a framework hides its communication behind backward (the
original study's finding 3). Writes bench/results/overlap.csv.

  .venv/bin/python bench/overlap.py [--model googlenet] [--batch-size 8] [--image-size 64]
      [--traced 5] [--framework torch tensorflow mxnet jax] [--out bench/results/overlap.csv]
"""

import argparse
import json
import statistics
import sys
import tempfile
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from overhead import machine, write_table  # noqa: E402

from analysis import trace  # noqa: E402
from harness import launch, paths  # noqa: E402
from harness.vocabulary import trace_name  # noqa: E402
from workloads import frameworks  # noqa: E402

COLUMNS = ("wall", "forward", "backward", "update", "comm", "comm_total", "overlap")


def config(folder, args):
    conf = yaml.safe_load((ROOT / "config" / "config.yaml").read_text())
    conf.update(
        results=str(Path(folder) / "results"),
        data={"kind": "synthetic"},
        warmup=2,
        iterations=3,
        profile_iterations=args.traced,
        image_size=args.image_size,
        run_timeout_s=900,
    )
    return conf


def traced_phases(conf, framework, comm, args):
    """Per traced iteration and rank: the phases derived from the run's traces."""
    run = {
        "framework": framework,
        "model": args.model,
        "comm": comm,
        "layout": "best",
        "timing": "native",
        "nodes": 1,
        "ranks_per_node": 2,
        "batch_size": args.batch_size,
        "loader_workers": 0,
        "repeat": 0,
    }
    status = launch.launch(conf, run, {})
    if status["status"] != "ok":
        sys.exit(f"{framework} {comm}: {status['reasons']}")
    run_dir, _, _ = paths.run_files(conf, run)
    derived = {}
    for rank in (0, 1):
        doc = json.loads((run_dir / trace_name(rank)).read_text())
        derived.update(trace.derive(framework, doc["traceEvents"]))
    return list(derived.values())


def row(framework, comm, phases, args):
    out = {"framework": framework, "comm": comm, "model": args.model, "ranks": 2, "batch_size": args.batch_size}
    for column in COLUMNS:
        out[f"{column}_s"] = round(statistics.median(p[f"{column}_s"] for p in phases), 4)
    ratios = [p["overlap_ratio"] for p in phases if p["comm_total_s"] > 0]
    out["overlap_ratio"] = round(statistics.median(ratios), 3) if ratios else ""
    out["traced_iterations"] = len(phases)
    out["library"] = frameworks.library(framework)
    out["machine"] = machine()
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--framework", nargs="+", default=list(frameworks.NAMES), choices=frameworks.NAMES)
    ap.add_argument("--comm", nargs="+", default=["overlap", "sequential"], choices=["overlap", "sequential"])
    ap.add_argument("--model", default="googlenet")
    ap.add_argument("--batch-size", type=int, default=8)
    ap.add_argument("--image-size", type=int, default=64)
    ap.add_argument("--traced", type=int, default=5, help="traced iterations per run")
    ap.add_argument("--out", default=str(ROOT / "bench" / "results" / "overlap.csv"))
    args = ap.parse_args()
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        conf = config(tmp, args)
        for framework in args.framework:
            for comm in args.comm:
                rows.append(row(framework, comm, traced_phases(conf, framework, comm, args), args))
                print(rows[-1], flush=True)
    write_table(rows, args.out)


if __name__ == "__main__":
    main()
