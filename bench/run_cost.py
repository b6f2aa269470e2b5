"""Benchmark record (not a test): where a study's runs spend their wall time (bench/results/run-cost.csv).

Reads a finished study's results folder: every ok run's parts (dlscale/analysis/cost.py: launch,
interpreter, framework import, build, data, warm-up with the compilation in it, timed iterations,
traced iterations, teardown), and gives per framework, model and rank count the median seconds of
each part over the study's blocks, with the share of the run that is timed; a last row per study
sums every run. Appends the rows labelled `--label` (before or after a change) with the date, the
commit, the machine and the study's 1-thread matrix-multiply rate (which tells machines apart),
keeping the table's other rows. A run recorded before its startup was stamped has `start` only.

  .venv/bin/python bench/run_cost.py RESULTS --label after [--commit SHA] [--note TEXT]
      [--out bench/results/run-cost.csv]
"""

import argparse
import datetime
import statistics
import sys
from pathlib import Path

import pandas as pd

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from bench.overhead import machine  # noqa: E402
from bench.study_time import commit, matmul  # noqa: E402
from dlscale.analysis.cost import PARTS, run_cost  # noqa: E402
from dlscale.core import paths  # noqa: E402

GROUP = ["framework", "model", "ranks"]
SECONDS = ["elapsed", *PARTS]
COLUMNS = ["label", "date", "commit", *GROUP, "runs", *(f"{p}_s" for p in SECONDS), "timed_share"]
COLUMNS += ["matmul_gflops_1_thread", "note", "machine"]


def costs(results):
    """One row per ok run of the study: its identity and its parts (seconds)."""
    runs = pd.read_csv(Path(results) / paths.TABLES["runs"])
    rows = []
    for run in runs[runs["status"] == "ok"].to_dict("records"):
        key = {"framework": run["framework"], "model": run["model"], "ranks": run["nodes"] * run["ranks_per_node"]}
        rows.append(key | run_cost(Path(results) / paths.run_folder(run)))
    if not rows:
        raise SystemExit(f"{results}: no ok run in {paths.TABLES['runs']}")
    return pd.DataFrame(rows)


def _median(values):
    values = [v for v in values if pd.notna(v)]
    return round(statistics.median(values), 3) if values else None


def rows(table, label, note, results, made_by=None):
    """The table's rows of one study (made by commit `made_by`; where None, the checkout's it ran in:
    study_time.commit): per framework, model and ranks, then the study's sum."""
    common = {"label": label, "date": datetime.date.today().isoformat(), "commit": made_by or commit(results)}
    common |= {"matmul_gflops_1_thread": matmul(Path(results) / paths.TABLES["peak"]), "note": note}
    common |= {"machine": machine()}
    out = []
    for key, group in table.groupby(GROUP):
        medians = {f"{p}_s": _median(group[p]) for p in SECONDS if p in group}
        share = round(medians["timed_s"] / medians["elapsed_s"], 3)
        out.append({**common, **dict(zip(GROUP, key)), "runs": len(group), **medians, "timed_share": share})
    sums = {f"{p}_s": round(table[p].sum(min_count=1), 1) for p in SECONDS if p in table}
    share = round(sums["timed_s"] / sums["elapsed_s"], 3)
    every = {"framework": "all", "model": "all", "ranks": "all", "runs": len(table)}
    out.append({**common, **every, **sums, "timed_share": share})
    return out


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("results", help="a finished study's results folder")
    ap.add_argument("--label", required=True, help="before or after the change measured")
    ap.add_argument("--commit", help="the commit the study ran (default: the checkout's it ran in)")
    ap.add_argument("--note", default="")
    ap.add_argument("--out", default=str(ROOT / "bench" / "results" / "run-cost.csv"))
    args = ap.parse_args(argv)
    new = pd.DataFrame(rows(costs(args.results), args.label, args.note, args.results, args.commit), columns=COLUMNS)
    out = Path(args.out)
    table = pd.concat([pd.read_csv(out), new], ignore_index=True) if out.exists() else new
    table[COLUMNS].to_csv(out, index=False)
    print(new.drop(columns=["date", "commit", "note", "machine"]).to_string(index=False))
    print(f"wrote {out}")


if __name__ == "__main__":
    main()
