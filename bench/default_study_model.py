"""Benchmark record (not a test): the performance model against a finished study's multi-rank runs, one
row per framework and network (bench/results/default-study-model.csv).

Reads the study's own model.csv (dlscale/analysis/prediction.py wrote it) and, per framework and
network, over the runs at `--ranks` ranks that the model predicted: the medians of the measured and
predicted iteration time and total gradient communication, the iteration's error as the predicted
median over the measured median less 1, and the configuration's 95% interval of that error as its
model.csv gives it (the spread of its runs, its 1-rank baseline's and its contention calibration's).
Appends the rows with the study's commit, the note and the machine, keeping the table's other rows;
the table is the default study's, so a study whose runs at those ranks differ in anything but their
framework and network (library, schedule, batch ...) is refused with what differs.

  .venv/bin/python bench/default_study_model.py RESULTS --note TEXT [--ranks 2]
      [--out bench/results/default-study-model.csv]
"""

import argparse
import sys
from pathlib import Path

import pandas as pd

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from bench.overhead import append_table, machine  # noqa: E402
from bench.study_time import commit  # noqa: E402
from dlscale.core import paths  # noqa: E402
from dlscale.core.vocabulary import CONFIG_KEYS  # noqa: E402

GROUP = ["framework", "model"]
MEDIANS = ["iteration_s", "predicted_iteration_s", "comm_total_s", "predicted_comm_total_s"]
INTERVAL = ["error_ci_lo", "error_ci_hi"]
COLUMNS = ["study_commit", *GROUP, *MEDIANS, "error_iteration", *INTERVAL, "runs", "note", "machine"]
# What may not vary among one row's runs besides repeat and block: the table compares like with like.
SAME = [k for k in CONFIG_KEYS if k not in GROUP]


def predicted(model_csv, ranks):
    """The model's rows at `ranks` ranks that it predicted; a clear error where there are none."""
    table = pd.read_csv(model_csv)
    rows = table[(table["ranks"] == ranks) & table["predicted_iteration_s"].notna()]
    if rows.empty:
        raise SystemExit(f"{model_csv}: no run at {ranks} ranks that the model predicted")
    differ = [k for k in SAME if k in rows and rows.groupby(GROUP)[k].nunique(dropna=False).max() > 1]
    if differ:
        raise SystemExit(f"{model_csv}: runs at {ranks} ranks of one framework and network differ in {differ}")
    return rows


def rows_of(results, ranks, note):
    """One row per framework and network of the study in `results`."""
    rows = predicted(Path(results) / paths.TABLES["model"], ranks)
    out = []
    for (framework, model), runs in rows.groupby(GROUP, sort=True):
        med = {k: runs[k].median() for k in MEDIANS}
        bounds = {k: runs[k].dropna().unique() for k in INTERVAL}
        out.append(
            {"study_commit": commit(results), "framework": framework, "model": model}
            | {k: round(v, 4) for k, v in med.items()}
            | {"error_iteration": round(med["predicted_iteration_s"] / med["iteration_s"] - 1, 4)}
            # one interval per configuration: every run of it carries the same
            | {k: round(float(v[0]), 4) if len(v) == 1 else "" for k, v in bounds.items()}
            | {"runs": len(runs), "note": note, "machine": machine()}
        )
    return out


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("results", help="the study's results folder")
    parser.add_argument("--ranks", type=int, default=2, help="the rank count whose runs are compared (default 2)")
    parser.add_argument("--note", default="", help="how the study ran (fresh clone, command, machine load)")
    parser.add_argument("--out", default=str(ROOT / "bench" / "results" / "default-study-model.csv"))
    args = parser.parse_args()
    new = rows_of(args.results, args.ranks, args.note)
    for r in new:
        print(f"{r['framework']} {r['model']}: error {r['error_iteration']:+.1%} over {r['runs']} runs")
    append_table(new, args.out, COLUMNS)


if __name__ == "__main__":
    main()
