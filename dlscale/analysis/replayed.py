"""The replay's measurements (dlscale/runtime/replay.py: a study's gradient traffic on more nodes than it
ran on) beside the model's two predictions of them (replay.csv)."""

import json
from pathlib import Path

import numpy as np
import pandas as pd

from dlscale.analysis.metrics import mean_ci
from dlscale.analysis.model import Gradients, error_parts, predict, relative_error, ring_cost
from dlscale.analysis.prediction import costs, median_abs, off_target
from dlscale.core.vocabulary import BASELINE_KEYS as MATCH
from dlscale.core.vocabulary import TEXT_COLUMNS
from dlscale.runtime import replay
from dlscale.workloads.frameworks import HOROVOD

# What a replay measured per plan and node count, and what the model and the extrapolation predict of it.
MEASURED = ["nodes", "ranks", "iterations", "iteration_s", "iteration_ci95", "comm_exposed_s"]
PREDICTED = ["predicted_iteration_s", "predicted_comm_exposed_s", "error_iteration", "error_from_compute"]
PREDICTED += ["error_from_exposed", "extrapolated_iteration_s", "error_extrapolated"]
REPLAY_COLUMNS = MATCH + MEASURED + PREDICTED + ["failure"]

KEY = "plan"
REPLAY_FIELDS = ("schema", "ranks", "iteration", "iteration_s", "exposed_s")


def read_replay(path, nodes):
    """A replay's output -> per plan, the mean iteration over ranks (the rate all progress at) and its interval."""
    lines = [json.loads(line) for line in Path(path).read_text().splitlines() if line.strip()]
    for number, rec in enumerate(lines, start=1):
        if rec.get("schema") != replay.SCHEMA:
            raise ValueError(f"{path}:{number}: schema is {rec.get('schema')!r}, expected {replay.SCHEMA!r}")
        # the plan's key: every field but the measurement's own
        rec[KEY] = json.dumps({k: v for k, v in rec.items() if k not in REPLAY_FIELDS}, sort_keys=True)
    failed = [r for r in lines if "failed" in r]
    if failed:
        return [{"nodes": nodes, "failure": "; ".join(x for x in (failed[0]["failed"], failed[0].get("error")) if x)}]
    rows = []
    for key, group in pd.DataFrame(lines).groupby(KEY, sort=False):
        mean, low, _ = mean_ci(group["iteration_s"].map(np.mean))
        rows.append(
            {
                KEY: key,
                **json.loads(key),
                "nodes": nodes,
                "ranks": int(group["ranks"].iloc[0]),
                "iterations": len(group),
                "iteration_s": mean,
                "iteration_ci95": (mean - low) / mean,
                "comm_exposed_s": group["exposed_s"].map(np.mean).mean(),
                "failure": "",
            }
        )
    return rows


MEASURED_COLUMNS = [KEY] + MATCH + MEASURED + ["failure"]


def measured(replays):
    """replayed.csv from the replays' outputs, [(path, nodes)] (`read_replay`)."""
    rows = [row for path, nodes in replays for row in read_replay(path, nodes)]
    return pd.DataFrame(rows).reindex(columns=MEASURED_COLUMNS)


def read_table(path):
    """A table (replayed.csv, runs.csv, model.csv, ...) whose empty cells alone are NaN: a failure's reason,
    a "None" or an "NA" stays text."""
    return pd.read_csv(path, keep_default_na=False, na_values=[""], dtype=TEXT_COLUMNS)


def replay_table(replays, plans, sweep, fits):
    """replayed.csv beside predicted_* (the sweep on its nodes) and extrapolated_* (the smallest ring fit)."""
    cost_by = costs(sweep, fits)
    horovod = fits[(fits["path"].fillna("mpi") == "horovod") & fits["alpha_s"].notna()].sort_values("ranks")
    ring = horovod.iloc[0] if len(horovod) else None
    by_key = {json.dumps(p["key"], sort_keys=True): p for p in plans}
    rows = []
    for row in replays.to_dict("records"):
        row["failure"] = row["failure"] if isinstance(row["failure"], str) else ""
        row["nodes"] = int(row["nodes"])
        plan = by_key.get(row.pop(KEY, None))
        if plan and not row["failure"]:
            row["ranks"] = int(row["ranks"])
            row.update(_predicted(row, plan, cost_by.get((row["nodes"], 1, HOROVOD)), ring))
        rows.append(row)
    return pd.DataFrame(rows).reindex(columns=REPLAY_COLUMNS)


def _predicted(row, plan, cost, ring):
    """One replayed row's predictions from the sweep on its nodes (`cost`) and the ring fit (`ring`), if any."""
    out = {}
    args = (plan["phases"], Gradients.of(plan, plan["ready"]), row["ranks"])
    if cost is not None:
        p = predict(*args, cost)
        out["predicted_iteration_s"], out["predicted_comm_exposed_s"] = p["iteration_s"], p["comm_exposed_s"]
        out["error_iteration"] = relative_error(p["iteration_s"], row["iteration_s"])
        out["error_from_compute"], out["error_from_exposed"] = error_parts(
            p["iteration_s"], p["comm_exposed_s"], row["iteration_s"], row["comm_exposed_s"]
        )
    if ring is not None:
        far = ring_cost(row["ranks"], ring.alpha_s, ring.beta_s_per_byte)
        out["extrapolated_iteration_s"] = predict(*args, far)["iteration_s"]
        out["error_extrapolated"] = relative_error(out["extrapolated_iteration_s"], row["iteration_s"])
    return out


def replay_error(table):
    """Median |relative error| of the replayed iteration time, over replayed configurations."""
    ok = table.dropna(subset=["error_iteration"])
    worst = ok["iteration_ci95"].max()
    return {
        "replays": len(ok),
        "nodes": sorted(int(n) for n in ok["nodes"].unique()),
        "median_abs_error_iteration": median_abs(ok["error_iteration"]),
        "median_abs_error_extrapolated": median_abs(ok["error_extrapolated"]),
        "worst_iteration_ci95": None if pd.isna(worst) else float(worst),
        "off_target": off_target(ok, MATCH + ["nodes"]),
    }
