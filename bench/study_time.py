"""Benchmark record (not a test): one row of bench/results/study-time.csv from a finished study.

Reads the study's results folder: its runs (each run's own elapsed_s from runs.csv, JAX's apart),
summary.csv (configurations, and how many have the 95% interval of their iteration time within
+-5%: metrics.PRECISION), comparisons.csv (framework pairs; how many differ by the paired
analysis, and how many each analysis of the same runs resolves: the block model, paired within
blocks and independent), peak.csv (the machine's 1-thread matrix-multiply rate, the median over
the study's frameworks: what tells machines apart) and, with a second pass, second_pass.csv (runs
it added); the study's design from its order.csv (blocked where its positions are set); the study's
wall time is given (snakemake's, timed outside); and the blocks at which the block model would
resolve 20 of 24 pairs at the measured spreads (what this machine would need to meet that target).
Appends the row, keeping the table's earlier rows (`pairs_resolved` before the block model was
the paired analysis's: read as `pairs_resolved_paired`).

  .venv/bin/python bench/study_time.py RESULTS --elapsed-s 741 [--note TEXT] [--out bench/results/study-time.csv]
"""

import argparse
import datetime
import math
import subprocess
import sys
from pathlib import Path

import pandas as pd

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from bench.overhead import append_table, machine  # noqa: E402
from dlscale.analysis.comparisons import RESOLVED, blocks_for, one_analysis  # noqa: E402
from dlscale.analysis.metrics import PRECISION  # noqa: E402
from dlscale.core import paths  # noqa: E402

COLUMNS = ["date", "commit", "frameworks", "models", "runs", "elapsed_s", "jax_runs_s", "other_runs_s"] + [
    "configurations",
    "within_5pct",
    "pairs",
    "pairs_differ",
    "runs_added",
    "design",
    "pairs_resolved_block",
    "pairs_resolved_paired",
    "pairs_resolved_independent",
    "blocks_for_20_of_24",
    "matmul_gflops_1_thread",
    "note",
    "machine",
]


def commit(results):
    """The short commit of the checkout the study ran in (the folder holding `results`, where it is one;
    else this checkout's): the table's `commit`."""
    for where in (Path(results).resolve().parent, ROOT):
        done = subprocess.run(["git", "-C", str(where), "rev-parse", "--short", "HEAD"], capture_output=True, text=True)
        if done.returncode == 0:
            return done.stdout.strip()
    return ""


def matmul(peak_csv):
    """The median over frameworks of the 1-thread matrix-multiply rate (GFLOP/s), or empty."""
    if not peak_csv.is_file():
        return ""
    peak = pd.read_csv(peak_csv)
    one = peak.loc[peak["threads"] == 1, "matmul_flops_s"].dropna()
    return round(one.median() / 1e9, 1) if len(one) else ""


def _blocks_for_target(pairs):
    """The blocks at which the block model would resolve 20 of 24 pairs (five sixths of the study's) at
    their measured spreads: the issue's target, in the blocks this machine would need; empty beyond
    the reach of the table (comparisons.MOST_BLOCKS)."""
    if "blocks_needed" not in pairs or not len(pairs):
        return ""
    needed = blocks_for(pairs, math.ceil(len(pairs) * 20 / 24))
    return "" if needed is None else needed


def row(results, elapsed_s, note):
    """The study's row: what ran, how long, and how precise its configurations came out."""
    table = {name: Path(results) / file for name, file in paths.TABLES.items()}
    runs = pd.read_csv(table["runs"])
    summary = pd.read_csv(table["summary"])
    pairs = pd.read_csv(table["comparisons"], keep_default_na=False)
    pairs = pairs[pairs["dimension"] == "framework"]
    order = pd.read_csv(table["order"], keep_default_na=False) if table["order"].is_file() else None
    plan = pd.read_csv(table["second_pass"]) if table["second_pass"].is_file() else None
    jax = runs["framework"] == "jax"
    return {
        "date": datetime.date.today().isoformat(),
        "commit": commit(results),
        "frameworks": ", ".join(dict.fromkeys(runs["framework"])),
        "models": ", ".join(dict.fromkeys(runs["model"])),
        "runs": len(runs),
        "elapsed_s": round(elapsed_s),
        "jax_runs_s": round(runs.loc[jax, "elapsed_s"].sum()),
        "other_runs_s": round(runs.loc[~jax, "elapsed_s"].sum()),
        "configurations": len(summary),
        "within_5pct": int((summary["iteration_s_ci_rel"] <= PRECISION).sum()),
        "pairs": len(pairs),
        "pairs_differ": int(pairs["verdict_paired"].isin(RESOLVED[:2]).sum()),
        "runs_added": "" if plan is None else int((plan["repeats_planned"] - plan["repeats_first"]).sum()),
        "design": "" if order is None else ("blocked" if (order["position"] != "").all() else "unordered"),
        "pairs_resolved_block": one_analysis(pairs),
        "pairs_resolved_paired": one_analysis(pairs, "_paired"),
        "pairs_resolved_independent": one_analysis(pairs, "_independent"),
        "blocks_for_20_of_24": _blocks_for_target(pairs),
        "matmul_gflops_1_thread": matmul(table["peak"]),
        "note": note,
        "machine": machine(),
    }


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("results", help="the study's results folder")
    parser.add_argument("--elapsed-s", type=float, required=True, help="the study's wall time, seconds")
    parser.add_argument("--note", default="", help="what else was true of the machine while it ran")
    parser.add_argument("--out", default=str(ROOT / "bench" / "results" / "study-time.csv"))
    args = parser.parse_args()
    new = row(args.results, args.elapsed_s, args.note)
    print(new)
    append_table([new], args.out, COLUMNS, _renamed)


def _renamed(old):
    """An earlier row, its `pairs_resolved` (before the block model: the paired analysis's) read as such."""
    return old | ({"pairs_resolved_paired": old["pairs_resolved"]} if "pairs_resolved" in old else {})


if __name__ == "__main__":
    main()
