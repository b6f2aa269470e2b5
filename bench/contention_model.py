"""Benchmark record (not a test): what the contention calibration does to the model on one finished
study. The study's model (dlscale/analysis/prediction.py) is made three times from its own tables:
without the slowdowns (every shared node assumed as fast as one rank alone, the model before the
calibration), with the slowdowns its calibration measured (contention.csv) but no allreduce taking CPU
from compute (the sweep's cores_used left out), and with both (the model as it is); per configuration
of 2 or more ranks per node, the median relative error of the predicted iteration over its repeats in
each, beside the slowdown, its interval and the sweep's cores. Writes bench/results/contention-model.csv
(rows of earlier studies kept).

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

KEYS = ["framework", "model", "comm", "comm_library", "nodes", "ranks_per_node"]


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
    table, _, _ = prediction.model_table(runs, status, tensors, sweep, fits, slowdowns)
    table = table[table["ranks_per_node"] > 1].dropna(subset=["error_iteration"])
    return table.groupby(KEYS)[["error_iteration", "comm_cores"]].median()


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("results", type=Path)
    ap.add_argument("--note", default="")
    ap.add_argument("--out", default=str(ROOT / "bench" / "results" / "contention-model.csv"))
    args = ap.parse_args(argv)
    calibrated = pd.read_csv(args.results / TABLES["contention"], keep_default_na=False, na_values=[""])
    slowdowns = contention.slowdowns(calibrated)
    both, without = errors(args.results, slowdowns), errors(args.results, {}, comm_cpu=False)
    with_ = errors(args.results, slowdowns, comm_cpu=False)["error_iteration"]
    commit = subprocess.run(["git", "-C", str(ROOT), "rev-parse", "--short", "HEAD"], capture_output=True, text=True)
    rows = []
    for key, error in with_.items():
        ident = dict(zip(KEYS, key))
        match = calibrated
        for k in ("framework", "model", "comm", "comm_library", "ranks_per_node"):
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
                "machine": machine(),
                "date": datetime.date.today().isoformat(),
                "commit": commit.stdout.strip(),
                "note": args.note,
            }
        )
    out = Path(args.out)
    table = pd.DataFrame(rows)
    if out.exists():
        table = pd.concat([pd.read_csv(out, keep_default_na=False), table], ignore_index=True)[list(rows[0])]
    table.to_csv(out, index=False)
    print(table.tail(len(rows)).to_string(index=False))
    print(f"wrote {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
