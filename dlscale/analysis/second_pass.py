"""The second pass: a configuration whose 95% interval is wider than `target` gets the repeats its CV says bring
it within, up to `max_repeats`, within `max_seconds` in all (a checkpoint). Docs: docs/concepts/statistics.md."""

import math

import pandas as pd

from dlscale.analysis import metrics
from dlscale.core.vocabulary import CONFIG_KEYS, MATRIX_KEYS

MET, ADDED, BY_REPEATS = "within target", "repeats added", "repeats added up to max_repeats"
BY_SECONDS, TOO_FEW = "max_seconds spent", "fewer than 2 ok runs"
_FIRST = ["repeats_first", "iteration_s_ci_rel_first", "repeats_needed", "run_s"]  # what the first pass found
COLUMNS = CONFIG_KEYS + _FIRST + ["repeats_planned", "second_pass"]


def plan(run_metrics, runs, repeats, target, max_repeats, max_seconds):
    """Per configuration of the first pass (`runs`: runs.csv; `run_metrics`): the repeats it gets in all and why."""
    by_config = runs.groupby(CONFIG_KEYS, observed=True, dropna=False)
    rows = [_first(key, group, run_metrics, repeats, target, max_repeats) for key, group in by_config]
    budget = float(max_seconds)

    def priority(row):  # those the bound on repeats lets reach the target first, the cheapest first
        return row["repeats_needed"] > max_repeats, (row["repeats_planned"] - row["repeats_first"]) * row["run_s"]

    for row in sorted(rows, key=priority):
        if row["second_pass"] != ADDED:
            continue
        want = row["repeats_planned"] - repeats
        afford = min(want, int(budget // row["run_s"])) if row["run_s"] > 0 else want
        row["repeats_planned"] = repeats + afford
        budget -= afford * row["run_s"]
        if afford < want:
            row["second_pass"] = BY_SECONDS
        elif row["repeats_needed"] > max_repeats:
            row["second_pass"] = BY_REPEATS
    return pd.DataFrame(rows, columns=COLUMNS)


def _first(key, runs, run_metrics, repeats, target, max_repeats):
    ok = run_metrics.merge(runs[runs["status"] == "ok"][CONFIG_KEYS + ["repeat"]], on=CONFIG_KEYS + ["repeat"])
    times = ok["iteration_s"].dropna()
    mean, lo, _, _ = metrics.interval(times)
    rel = (mean - lo) / mean if len(times) >= 2 and mean > 0 else math.nan
    need = metrics.repeats_needed(metrics.cv(times), target)
    run_s = float(pd.to_numeric(runs["elapsed_s"], errors="coerce").mean())
    row = dict(zip(CONFIG_KEYS, key)) | dict(zip(_FIRST, (repeats, rel, need, run_s))) | {"repeats_planned": repeats}
    if len(times) < 2:
        row["second_pass"] = TOO_FEW
    elif rel <= target:
        row["second_pass"] = MET
    else:  # at least one more where the interval is wide (a bootstrap interval may be wider than t's formula)
        row["repeats_planned"] = max(repeats, min(max(need, repeats + 1), max_repeats))
        row["second_pass"] = ADDED if row["repeats_planned"] > repeats else BY_REPEATS
    return row


def added_runs(matrix, plan):
    """The runs (identity dicts) the plan adds to the first pass's `matrix`."""
    planned = {_key(row): int(row["repeats_planned"]) for row in plan.to_dict("records")}
    first = max((run["repeat"] for run in matrix), default=-1) + 1
    return [
        {**run, "repeat": repeat}
        for run in matrix
        if run["repeat"] == 0
        for repeat in range(first, planned.get(_key(run), first))
    ]


def _key(row):
    return tuple(str(row[k]) for k in MATRIX_KEYS)


def add_plan(summary, plan):
    """The summary with each configuration's first-pass interval, repeats planned and why."""
    keep = ["iteration_s_ci_rel_first", "repeats_planned", "second_pass"]
    return summary.merge(plan[CONFIG_KEYS + keep], on=CONFIG_KEYS, how="left")
