"""Benchmark record (not a test): how much of a study's run-to-run spread neighbouring runs share, read from the
study's own results (run_metrics.csv, order.csv). In the order the runs ran: the correlation at lags 1-4 of the
runs' residuals (log throughput less its cell's mean over the blocks; a cell: a configuration's framework and
library), and the spread left by log throughput = cell + stretch, a stretch consecutive runs as many as a block holds
or as a configuration has cells. A block model is left with the spread within its blocks: the design that runs each
configuration's cells back to back (dlscale/runtime/design.py) gets the second, interleaving them the first.

Writes bench/results/drift.csv (rows of the same study replaced).

  .venv/bin/python bench/drift.py RESULTS [RESULTS ...] [--name NAME] [--note TEXT] [--machine TEXT]
      [--out bench/results/drift.csv]
"""

import datetime
import sys
from pathlib import Path

import numpy as np
import pandas as pd

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from bench import studies  # noqa: E402
from dlscale.analysis.blocks import KEYS  # noqa: E402  (a configuration of the block model)
from dlscale.analysis.verdicts import RATE  # noqa: E402
from dlscale.core import paths  # noqa: E402
from dlscale.core.vocabulary import CONFIG_KEYS, TEXT_COLUMNS  # noqa: E402

LAGS = (1, 2, 3, 4)


def in_order(results):
    """The study's ok runs in the order they ran, each with its log rate and its residual from its cell's mean."""
    results = Path(results)
    runs = pd.read_csv(results / paths.TABLES["run_metrics"])
    order = pd.read_csv(results / paths.TABLES["order"])
    runs["run"] = [paths.run_path(r) for r in runs.to_dict("records")]
    runs = runs.merge(order, on="run", validate="one_to_one").sort_values(["block", "position"])
    if runs.empty:
        raise SystemExit(f"{results}: no run of run_metrics.csv is in order.csv (not a blocked study?)")
    runs["log"] = np.log(runs[RATE].astype(float))
    runs["cell"] = runs[CONFIG_KEYS].astype(str).agg("/".join, axis=1)
    runs["residual"] = runs["log"] - runs.groupby("cell")["log"].transform("mean")
    return runs.reset_index(drop=True)


def within(runs, length):
    """The residual spread of log rate = cell + stretch, a stretch `length` consecutive runs: as a block
    model whose blocks were those stretches is left with (sqrt of residual sum of squares / df)."""
    cells = pd.get_dummies(runs["cell"]).to_numpy(float)
    stretch = pd.get_dummies(np.arange(len(runs)) // length).to_numpy(float)[:, 1:]
    x = np.hstack([cells, stretch])
    df = len(runs) - np.linalg.matrix_rank(x)
    if df < 1:
        return float("nan")
    fitted, *_ = np.linalg.lstsq(x, runs["log"].to_numpy(), rcond=None)
    return float(np.sqrt(((runs["log"].to_numpy() - x @ fitted) ** 2).sum() / df))


def back_to_back(runs):
    """Whether each configuration's cells ran back to back in every block."""
    configuration = runs[KEYS + ["block"]].astype(str).agg("/".join, axis=1)
    starts = configuration != configuration.shift()
    return bool(starts.sum() == configuration.nunique())


def row(results, note):
    runs = in_order(results)
    r = runs["residual"].to_numpy()
    block = int(runs.groupby("block").size().median())
    cells = int(runs.groupby(KEYS + ["block"], dropna=False).size().median())
    fitted = Path(results) / paths.TABLES["blocks"]
    pooled = pd.read_csv(fitted)["sd_log"].median() if fitted.is_file() else float("nan")
    made = pd.read_csv(Path(results) / paths.TABLES["runs"], keep_default_na=False, dtype=TEXT_COLUMNS)
    commits = sorted(set(made.get("dlscale_commit", [])))  # empty in studies made before runs recorded it
    return {
        "study": str(results),
        "study_commit": " ".join(commits),
        "design": "cells back to back" if back_to_back(runs) else "interleaved",
        "runs": len(runs),
        "block_runs": block,
        "configuration_cells": cells,
        **{f"lag{k}": round(float(np.corrcoef(r[:-k], r[k:])[0, 1]), 3) for k in LAGS},
        "sd_log_block_stretch": round(within(runs, block), 4),
        "sd_log_cells_stretch": round(within(runs, cells), 4),
        "sd_log_block_model": round(float(pooled), 4),
        "note": note,
        "date": datetime.date.today().isoformat(),
        "command": f".venv/bin/python bench/drift.py {results}",
    }


def main(argv=None):
    args = studies.arguments(__doc__, ROOT / "bench" / "results" / "drift.csv", argv)
    named = {"study": args.name} if args.name else {}
    rows = [row(r, args.note) | named | {"machine": args.machine} for r in args.results]
    for r in rows:
        print(r)
    made = pd.DataFrame(rows)
    studies.write(made, args.out)


if __name__ == "__main__":
    main()
