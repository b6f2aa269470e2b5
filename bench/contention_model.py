"""Benchmark record (not a test): what the contention calibration does to the model on one finished
study. The study's model (dlscale/analysis/prediction.py) is made three times from its own tables:
without the slowdowns (every shared node assumed as fast as one rank alone, the model before the
calibration), with the slowdowns its calibration measured (contention.csv) but no allreduce taking CPU
from compute (the sweep's cores_used left out), and with both (the model as it is); per configuration
of 2 or more ranks per node, the median relative error of the predicted iteration over its repeats in
each, beside the slowdown, its interval and the sweep's cores; the median relative error of the predicted
communication (all allreduce time, comm_total_s) with the allreduces at the sweep's speed and as the
model has them, sharing the CPUs with backward; and the calibration's copy alone against
the study's own 1-rank runs (`alone_vs_1rank`: its mean iteration over theirs, summary.csv; near 1 where
the copies idle beside it take nothing from it). Writes bench/results/contention-model.csv (rows of
earlier studies kept).

  .venv/bin/python bench/contention_model.py RESULTS [--note TEXT] [--out bench/results/contention-model.csv]
"""

import argparse
import datetime
import subprocess
import sys
from pathlib import Path

import pandas as pd

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from bench.overhead import machine  # noqa: E402
from dlscale.analysis import contention, prediction  # noqa: E402
from dlscale.core.paths import TABLES  # noqa: E402

KEYS = ["framework", "model", "allreduce_schedule", "allreduce_library", "nodes", "ranks_per_node"]


def errors(results, slowdowns, comm_cpu=True):
    """Per configuration (KEYS) of 2 or more ranks per node: the median error of the predicted iteration
    and the sweep's cores (`comm_cpu` False: the sweep's cores_used left out, none taken from compute)."""
    read = {"keep_default_na": False, "na_values": [""]}
    runs = pd.read_csv(results / TABLES["run_metrics"])
    status = pd.read_csv(results / TABLES["runs"], **read)
    tensors = pd.read_csv(results / TABLES["tensors"])
    sweep, fits = pd.read_csv(results / TABLES["allreduce"]), pd.read_csv(results / TABLES["allreduce_fit"])
    if not comm_cpu:
        sweep = sweep.drop(columns=["cores_used"], errors="ignore")
    table, _, _ = prediction.model_table(runs, status, tensors, sweep, fits, prediction.Node(slowdowns))
    table = table[table["ranks_per_node"] > 1].dropna(subset=["error_iteration"])
    return table.groupby(KEYS)[["error_iteration", "error_comm_total", "comm_cores"]].median()


def alone_vs_1rank(results, calibration):
    """The calibration's copy alone (alone_s) over the mean iteration of the study's own 1-rank runs of
    the same configuration (summary.csv), or NaN where the study has none."""
    summary = pd.read_csv(results / TABLES["summary"])
    one = summary[(summary["nodes"] == 1) & (summary["ranks_per_node"] == 1)]
    for k in ("framework", "model", "allreduce_schedule", "allreduce_library"):
        one = one[one[k] == calibration[k]]
    return calibration["alone_s"] / one["iteration_s"].iloc[0] if len(one) else float("nan")


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("results", type=Path)
    ap.add_argument("--note", default="")
    ap.add_argument("--out", default=str(ROOT / "bench" / "results" / "contention-model.csv"))
    args = ap.parse_args(argv)
    calibrated = pd.read_csv(args.results / TABLES["contention"], keep_default_na=False, na_values=[""])
    slowdowns = contention.slowdowns(calibrated)
    both, without = errors(args.results, slowdowns), errors(args.results, {}, comm_cpu=False)
    unshared = errors(args.results, slowdowns, comm_cpu=False)
    with_ = unshared["error_iteration"]
    commit = subprocess.run(["git", "-C", str(ROOT), "rev-parse", "--short", "HEAD"], capture_output=True, text=True)
    rows = []
    for key, error in with_.items():
        ident = dict(zip(KEYS, key))
        match = calibrated
        for k in ("framework", "model", "allreduce_schedule", "allreduce_library", "ranks_per_node"):
            match = match[match[k] == ident[k]]
        s = match.iloc[0] if len(match) else {}
        rows.append(
            {
                **ident,
                "slowdown": round(s.get("slowdown", float("nan")), 4),
                "slowdown_ci_lo": round(s.get("slowdown_ci_lo", float("nan")), 4),
                "slowdown_ci_hi": round(s.get("slowdown_ci_hi", float("nan")), 4),
                "trials": s.get("trials"),
                "error_assumed_1": round(without["error_iteration"][key], 4),
                "error_calibrated": round(error, 4),
                "comm_cores": round(both["comm_cores"][key], 4),
                "error_with_comm_cpu": round(both["error_iteration"][key], 4),
                "error_comm_total_alone": round(unshared["error_comm_total"][key], 4),
                "error_comm_total": round(both["error_comm_total"][key], 4),
                "alone_vs_1rank": round(alone_vs_1rank(args.results, s), 4) if len(match) else float("nan"),
                "machine": machine(),
                "date": datetime.date.today().isoformat(),
                "commit": commit.stdout.strip(),
                "note": args.note,
            }
        )
    append_rows(rows, args.out)
    return 0


def append_rows(rows, out):
    """Write `rows` after the rows of earlier studies in the table at `out`, and print them."""
    out, table = Path(out), pd.DataFrame(rows)
    if out.exists():
        table = pd.concat([pd.read_csv(out, keep_default_na=False), table], ignore_index=True)[list(rows[0])]
    table.to_csv(out, index=False)
    print(table.tail(len(rows)).to_string(index=False))
    print(f"wrote {out}")


if __name__ == "__main__":
    sys.exit(main())
