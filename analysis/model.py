"""Communication inside training, and a performance model of synchronous SGD that predicts it.

Measured, per run (model.csv):
- comm_total_s: all allreduce work of an iteration, overlapped or not. In `sequential` mode it is
  the comm phase; in `overlap` mode it is the union of the intervals in which Horovod's timeline
  (rank 0, measured iterations only) shows an allreduce executing, per measured iteration.
- comm_exposed_s: what the step waits for, the comm phase; overlap_ratio = 1 - exposed / total.

Model, for a run on N ranks, from the 1-rank run of the same framework, model, comm mode and
batch (its io, h2d, forward, backward and update times) and the study's allreduce sweep on the
same nodes and ranks, which gives the time T(m) of one allreduce of m bytes through Horovod, fused
as Horovod fuses (`sweep_cost`: the measured medians, linear between sizes and beyond the largest;
the alpha-beta ring fit where a sweep has too few sizes):
- Gradient i (sizes from the run's records) is ready r_i seconds into backward: measured per
  tensor in PyTorch, whose allreduces start from backward hooks; at the end of backward where the
  framework starts communication after backward (TensorFlow, MXNet) and in sequential mode.
- Horovod's background thread wakes every cycle (HOROVOD_CYCLE_TIME, 1 ms), fuses the gradients
  ready by then into buffers of at most HOROVOD_FUSION_THRESHOLD bytes (128 MiB), and reduces the
  buffers one after another, each of m bytes in k tensors taking T(m) + (k - FUSED_PIECES) c: the
  sweep's T(m) moved FUSED_PIECES tensors per message, and c is the per-tensor cost from its
  many-tensor path (analysis/comm.py `per_tensor`).
- Predicted iteration = io + h2d + forward + backward + update + exposed, where exposed is how
  far the last allreduce ends after backward; comm_total is the sum of the buffers' times.
The extrapolation applies the same model with the ring model T(m) = 2(N-1) alpha + 2(N-1)/N m beta
for given link parameters instead of a measured sweep, and no per-tensor cost (it grows with the
ranks in ways no link parameter gives).
"""

import json
import math
from pathlib import Path

import numpy as np
import pandas as pd

from analysis.metrics import mean_ci
from harness import replay
from harness.allreduce import FUSED_PIECES, ring_time
from harness.vocabulary import (
    BACKWARD_S,
    COMM_S,
    CYCLE_TIME_S,
    FORWARD_S,
    FUSION_THRESHOLD_BYTES,
    H2D_S,
    IO_S,
    RUN_KEYS,
    UPDATE_S,
)
from harness.vocabulary import BASELINE_KEYS as MATCH

COMPUTE = [IO_S, H2D_S, FORWARD_S, BACKWARD_S, UPDATE_S]


def fusion_buffers(sizes, threshold=FUSION_THRESHOLD_BYTES):
    """(bytes, tensors) of each fused buffer Horovod makes from tensors ready together (in order)."""
    buffers = []
    for size in sizes:
        if buffers and buffers[-1][0] + size <= threshold:
            buffers[-1] = (buffers[-1][0] + size, buffers[-1][1] + 1)
        else:
            buffers.append((size, 1))
    return buffers


def sweep_cost(nbytes, times):
    """T(m) from a sweep's (bytes, median seconds): linear between sizes, extended past both ends."""
    m, t = np.asarray(nbytes, float), np.asarray(times, float)
    order = np.argsort(m)
    m, t = m[order], t[order]
    if len(m) < 2:
        raise ValueError("an allreduce sweep needs at least two sizes")
    slope = (t[-1] - t[-2]) / (m[-1] - m[-2])

    def cost(size):
        return float(np.interp(size, m, t)) if size <= m[-1] else float(t[-1] + slope * (size - m[-1]))

    return cost


def ring_cost(ranks, alpha, beta):
    return lambda size: ring_time(size, ranks, alpha, beta)


def schedule(ready, sizes, cost, threshold=FUSION_THRESHOLD_BYTES, cycle=CYCLE_TIME_S, per_tensor=0.0):
    """(time the last allreduce ends, busy time) for gradients `sizes` ready at times `ready`;
    cost(m) is the time of one allreduce of m bytes in FUSED_PIECES tensors (the sweep's), and each
    tensor a buffer holds beyond those adds per_tensor seconds (fewer take it off). Every input must
    be a finite number (a NaN compares false with everything: the loop would never advance)."""
    problem = _not_schedulable(ready, sizes, cycle, per_tensor)
    if problem:
        raise ValueError(f"cannot schedule allreduces: {problem}")
    order = sorted(range(len(sizes)), key=lambda i: ready[i])
    t_cycle, t_free, busy, k = -cycle, 0.0, 0.0, 0
    while k < len(order):
        t_cycle = max(t_cycle + cycle, t_free)
        first = ready[order[k]]
        if first > t_cycle:  # sleep whole cycles until the next gradient is there
            t_cycle += math.ceil((first - t_cycle) / cycle - 1e-9) * cycle
            # rounding may leave the cycle a hair before it: it is there, and every pass takes one
            t_cycle = max(t_cycle, first)
        batch = []
        while k < len(order) and ready[order[k]] <= t_cycle:
            batch.append(sizes[order[k]])
            k += 1
        t_free = t_cycle
        for nbytes, tensors in fusion_buffers(batch, threshold):
            step = cost(nbytes) + (tensors - FUSED_PIECES) * per_tensor
            if not math.isfinite(step):
                raise ValueError(f"cannot schedule allreduces: an allreduce of {nbytes} bytes costs {step} s")
            t_free += step
            busy += step
    return t_free, busy


def _not_schedulable(ready, sizes, cycle, per_tensor):
    """What makes `schedule`'s inputs unusable, or None."""
    if len(ready) != len(sizes):
        return f"{len(ready)} ready times for {len(sizes)} gradients"
    for name, values in (("ready time", ready), ("gradient size", sizes), ("per-tensor cost", [per_tensor])):
        bad = [v for v in values if not math.isfinite(v)]
        if bad:
            return f"{name} {bad[0]} is not a finite number"
    if not (math.isfinite(cycle) and cycle > 0):
        return f"cycle time {cycle} s is not a positive finite number"
    return None


def predict(base, sizes, ready, ranks, cost, threshold=FUSION_THRESHOLD_BYTES, cycle=CYCLE_TIME_S, per_tensor=0.0):
    """Predicted iteration, communication and exposed communication (s) on `ranks` ranks, where
    one allreduce of m bytes takes cost(m), plus per_tensor for each tensor beyond FUSED_PIECES.

    base: 1-rank phase means (COMPUTE keys); ready: seconds into backward at which each gradient
    is ready, or None when communication starts after backward.
    """
    backward = base[BACKWARD_S]
    compute = sum(base[k] for k in COMPUTE)
    if ranks < 2:
        return {"iteration_s": compute, "comm_total_s": 0.0, "comm_exposed_s": 0.0}
    ready = [backward] * len(sizes) if ready is None else [min(r, backward) for r in ready]
    end, busy = schedule(ready, sizes, cost, threshold, cycle, per_tensor)
    exposed = max(0.0, end - backward)
    return {"iteration_s": compute + exposed, "comm_total_s": busy, "comm_exposed_s": exposed}


def tensor_details(tensors, run):
    """Gradient sizes, readiness profile (or None) and fusion settings of one run, from the tables
    (tensors.csv rows of the run, its runs.csv row)."""
    mine = tensors.merge(pd.DataFrame([{k: run[k] for k in RUN_KEYS}]), on=RUN_KEYS).sort_values("tensor")
    ready = mine["ready_s"]
    return {
        "sizes": mine["bytes"].astype(int).tolist(),
        "ready": None if ready.isna().any() or not len(ready) else ready.tolist(),
        "threshold": int(_setting(run, "fusion_threshold_bytes", FUSION_THRESHOLD_BYTES)),
        "cycle": float(_setting(run, "cycle_time_s", CYCLE_TIME_S)),
    }


def _setting(run, key, default):
    """A run's setting from its runs.csv row, or Horovod's default where the row has none."""
    value = run.get(key)
    return default if value is None or pd.isna(value) else value


def _relerr(pred, meas):
    return (pred - meas) / meas if meas else math.nan


# The error a configuration may have before model_error.json says why it has more (issue 15's target).
TOLERANCE = 0.05


def error_parts(predicted_iteration, predicted_exposed, iteration, exposed):
    """A predicted iteration's relative error split by where it comes from, each part a share of
    the measured iteration, the two adding up to the error: (compute, exposed communication).
    Compute is the iteration less its exposed communication (the model's is the 1-rank phases)."""
    if not iteration:
        return math.nan, math.nan
    compute = ((predicted_iteration - predicted_exposed) - (iteration - exposed)) / iteration
    return compute, (predicted_exposed - exposed) / iteration


def off_target(table, keys):
    """The configurations (keys; medians over their rows) whose predicted iteration is off by more
    than TOLERANCE, each with the larger of its error parts as the measured reason."""
    cols = [
        "iteration_s",
        "comm_exposed_s",
        "predicted_iteration_s",
        "predicted_comm_exposed_s",
        "error_iteration",
        "error_from_compute",
        "error_from_exposed",
    ]
    ok = table.dropna(subset=["error_iteration"])
    out = []
    for key, group in ok.groupby(keys, sort=True):
        m = group[cols].median()
        if abs(m.error_iteration) <= TOLERANCE:
            continue
        compute = m.iteration_s - m.comm_exposed_s
        if abs(m.error_from_compute) >= abs(m.error_from_exposed):
            reason = (
                f"compute ({m.error_from_compute:+.1%} of the iteration): {compute:.3g} s of compute "
                f"per iteration measured, {m.predicted_iteration_s - m.predicted_comm_exposed_s:.3g} s "
                f"predicted (the model computes at the 1-rank run's speed)"
            )
        else:
            reason = (
                f"exposed communication ({m.error_from_exposed:+.1%} of the iteration): "
                f"{m.comm_exposed_s:.3g} s per iteration measured, {m.predicted_comm_exposed_s:.3g} s predicted"
            )
        out.append(
            {
                **{k: (v.item() if hasattr(v, "item") else v) for k, v in zip(keys, key)},
                "runs": len(group),
                **{c: round(float(m[c]), 4) for c in cols[-3:]},
                "reason": reason,
            }
        )
    return out


# Why a configuration's 1-rank runs give the model nothing to start from.
NO_PHASES = "1-rank baseline has no phase times"
NO_TRACES = f"{NO_PHASES} (native runs without traces: profile_iterations 0)"
ZERO_PHASES = "1-rank baseline's phase times add up to no time"
# Why a run of the study has no prediction besides (model.csv `not_predicted`).
BASELINE_ITSELF = "1 rank: the model's baseline"
NO_BASELINE = "no successful 1-rank run of this configuration"


def baselines(table, tensors):
    """Per MATCH key, from its 1-rank runs: mean compute phases (base) and the tensor_details; and
    per MATCH key whose 1-rank runs have no usable phase times, why (these never reach the model:
    a NaN phase would hang its schedule, a zero one divide by zero)."""
    out, unusable = {}, {}
    for key, group in table[table["ranks"] == 1].groupby(MATCH, observed=True):
        base = group[COMPUTE].mean()
        native = key[MATCH.index("timing")] == "native"
        if base.isna().any():
            unusable[key] = NO_TRACES if native else NO_PHASES
            continue
        if native:
            # traced iterations run under the profiler: scale their phases to the measured iteration
            base = base * group["iteration_s"].mean() / (base.sum() + group[COMM_S].mean())
        if not (np.isfinite(base).all() and base.sum() > 0):
            unusable[key] = ZERO_PHASES
            continue
        out[key] = {**tensor_details(tensors, group.iloc[0]), "base": base.to_dict()}
    return out, unusable


def study_baselines(runs, status, tensors):
    """The study's successful runs (metrics.run_table joined with runs.csv), their `baselines` and
    the configurations without one, with why."""
    keys = MATCH + ["nodes", "ranks_per_node", "repeat"]
    table = runs.merge(status[status["status"] == "ok"], on=keys, how="inner")
    return (table, *baselines(table, tensors))


def costs(sweep, fits):
    """{(nodes, ranks_per_node): (T(m), per-tensor cost)} from the sweep table, else the fit
    (allreduce*.csv): Horovod's own allreduce where the sweep has it, MPI's otherwise (sweeps made
    before the horovod path); the per-tensor cost from the horovod fit's `per_tensor_s` (0 where the
    sweep has no horovod_tensors path, or where it came out below 0: within the sweep's noise). A
    sweep that failed gives none: the sizes it measured before it failed stay in its table only."""
    out = {}
    failed = sweep_failures(fits)
    # a boolean array: an empty list would select no columns rather than no rows
    sweep = sweep[np.array([key not in failed for key in zip(sweep["nodes"], sweep["ranks_per_node"])], dtype=bool)]
    for path in ("mpi", "horovod"):  # horovod last: it wins
        mine = fits[fits["path"].fillna("mpi") == path]
        extra = {
            (r.nodes, r.ranks_per_node): max(0.0, r.per_tensor_s)
            for r in mine.itertuples()
            if not pd.isna(getattr(r, "per_tensor_s", math.nan))
        }
        for r in mine.itertuples():
            if not pd.isna(r.alpha_s):
                key = (r.nodes, r.ranks_per_node)
                out[key] = (ring_cost(r.ranks, r.alpha_s, r.beta_s_per_byte), extra.get(key, 0.0))
        for (nodes, rpn), g in sweep[sweep["path"].fillna("mpi") == path].groupby(["nodes", "ranks_per_node"]):
            if len(g) >= 2:
                out[(nodes, rpn)] = (sweep_cost(g["bytes"], g["median_s"]), extra.get((nodes, rpn), 0.0))
    return out


def sweep_failures(fits):
    """{(nodes, ranks_per_node): why} of the sweeps that failed (allreduce_fit.csv)."""
    return {
        (r.nodes, r.ranks_per_node): r.failure
        for r in fits.fillna({"failure": ""}).itertuples()
        if getattr(r, "failure", "")
    }


def not_predicted(run, bases, unusable, cost_by, failures):
    """Why the model predicts no time for this run (a model.csv row's run), or "" when it does."""
    key, place = tuple(run[k] for k in MATCH), (run["nodes"], run["ranks_per_node"])
    if run["ranks"] < 2:
        return BASELINE_ITSELF
    if key in unusable:
        return unusable[key]
    if key not in bases:
        return NO_BASELINE
    if place in failures:
        return f"allreduce sweep on {place[0]} node(s) x {place[1]} rank(s) per node failed: {failures[place]}"
    if place not in cost_by:
        return f"no allreduce time measured on {place[0]} node(s) x {place[1]} rank(s) per node (allreduce.csv)"
    return ""


def model_table(runs, status, tensors, sweep, fits):
    """One row per successful run: measured and predicted iteration and communication times.

    runs: metrics.run_table; status: runs.csv (gradient, fusion and timeline columns); tensors:
    tensors.csv; sweep and
    fits: allreduce.csv and allreduce_fit.csv. A run is predicted when its study has the matching
    1-rank run with phase times and an allreduce sweep for its nodes and ranks per node; any other
    says why not (`not_predicted`). Returns the table, the `baselines` and those without one.
    """
    table, bases, unusable = study_baselines(runs, status, tensors)
    cost_by, failures = costs(sweep, fits), sweep_failures(fits)
    rows = []
    for r in table.to_dict("records"):
        seq = r["comm"] == "sequential" or r["ranks"] == 1
        if r["timing"] == "native":  # from the traces: all allreduce time, and the part during compute
            total = r.get("comm_total_s", math.nan)
            ratio = r.get("overlap_s", math.nan) / total if total and total > 0 else math.nan
        else:
            total = r[COMM_S] if seq else r.get("timeline_comm_s", math.nan)
            ratio = 1 - r[COMM_S] / total if total and total > 0 else math.nan
        row = {k: r.get(k) for k in COLUMNS[: COLUMNS.index("iteration_s")]}
        row.update(iteration_s=r["iteration_s"], comm_total_s=total, comm_exposed_s=r[COMM_S], overlap_ratio=ratio)
        row["not_predicted"] = not_predicted(r, bases, unusable, cost_by, failures)
        if not row["not_predicted"]:
            base, cost = bases[tuple(r[k] for k in MATCH)], cost_by[(r["nodes"], r["ranks_per_node"])]
            p = predict(
                base["base"],
                base["sizes"],
                None if seq else base["ready"],
                r["ranks"],
                cost[0],
                base["threshold"],
                base["cycle"],
                cost[1],
            )
            row.update({f"predicted_{k}": v for k, v in p.items()})
            row["error_iteration"] = _relerr(p["iteration_s"], r["iteration_s"])
            row["error_comm_total"] = _relerr(p["comm_total_s"], total)
            row["error_from_compute"], row["error_from_exposed"] = error_parts(
                p["iteration_s"], p["comm_exposed_s"], r["iteration_s"], r[COMM_S]
            )
        rows.append(row)
    return pd.DataFrame(rows).reindex(columns=COLUMNS), bases, unusable


COLUMNS = MATCH + [
    "nodes",
    "ranks_per_node",
    "ranks",
    "repeat",
    "grad_tensors",
    "grad_bytes",
    "link_rate_mbit",
    "iteration_s",
    "comm_total_s",
    "comm_exposed_s",
    "overlap_ratio",
    "predicted_iteration_s",
    "predicted_comm_total_s",
    "predicted_comm_exposed_s",
    "error_iteration",
    "error_comm_total",
    "error_from_compute",
    "error_from_exposed",
    "not_predicted",
]


def _median_abs(values):
    """The median |value| as a number, or None (JSON's null, not NaN) where there is none."""
    m = values.abs().median()
    return None if pd.isna(m) else float(m)


def model_error(table):
    """Median |relative error| of predicted iteration and communication time, over predicted runs,
    and the configurations off by more than TOLERANCE with the reason measured (`off_target`);
    runs of 2 or more ranks not predicted are counted by why (`not_predicted`), and where no run
    was predicted `reason` says why."""
    pred = table.dropna(subset=["error_iteration"])
    multi = table[table["ranks"] > 1]
    missed = multi["not_predicted"].fillna("")
    out = {
        "runs": len(pred),
        "median_abs_error_iteration": _median_abs(pred["error_iteration"]),
        "median_abs_error_comm_total": _median_abs(pred["error_comm_total"]),
        "off_target": off_target(pred, MATCH + ["nodes", "ranks_per_node"]),
        "not_predicted": {k: int(v) for k, v in missed[missed != ""].value_counts().sort_index().items()},
    }
    if not len(pred):
        out["reason"] = (
            "no successful run"
            if table.empty
            else "no run with 2 or more ranks"
            if multi.empty
            else "; ".join(out["not_predicted"]) or "no predicted run has a measured time to compare"
        )
    return out


def extrapolate(bases, links, max_ranks=1024):
    """Predicted weak-scaling efficiency T(1)/T(N) for N = 2, 4, ... max_ranks over each link.

    bases: from `baselines`; links: {name: {"gbit_s": bandwidth, "latency_us": alpha}}. The ring
    spans all N ranks with the link as its slowest hop (one rank per node).
    """
    rows = []
    for key, b in bases.items():
        ident = dict(zip(MATCH, key))
        single = sum(b["base"].values())
        ready = None if ident["comm"] == "sequential" else b["ready"]
        for name, link in links.items():
            alpha, beta = link["latency_us"] * 1e-6, 8 / (link["gbit_s"] * 1e9)
            n = 2
            while n <= max_ranks:
                p = predict(b["base"], b["sizes"], ready, n, ring_cost(n, alpha, beta), b["threshold"], b["cycle"])
                rows.append(
                    {
                        **ident,
                        "link": name,
                        "ranks": n,
                        "predicted_iteration_s": p["iteration_s"],
                        "predicted_efficiency": single / p["iteration_s"],
                    }
                )
                n *= 2
    return pd.DataFrame(rows, columns=MATCH + ["link", "ranks", "predicted_iteration_s", "predicted_efficiency"])


REPLAY_COLUMNS = MATCH + [
    "nodes",
    "ranks",
    "iterations",
    "iteration_s",
    "iteration_ci95",
    "comm_exposed_s",
    "predicted_iteration_s",
    "predicted_comm_exposed_s",
    "error_iteration",
    "error_from_compute",
    "error_from_exposed",
    "extrapolated_iteration_s",
    "error_extrapolated",
    "failure",
]


KEY = "plan"
REPLAY_FIELDS = ("schema", "ranks", "iteration", "iteration_s", "exposed_s")


def read_replay(path, nodes):
    """A replay's output (harness.replay) -> one row per plan: the measured iteration (mean over
    ranks and iterations: ranks are coupled only by their allreduces, so one rank's iteration may
    hold another's wait and the mean is the rate at which all progress), its 95% interval relative
    to the mean (over iterations of the rank mean), and the exposed communication; a replay that
    failed is one row with its reason."""
    lines = [json.loads(line) for line in Path(path).read_text().splitlines() if line.strip()]
    for rec in lines:  # the plan's key: every field but the measurement's own
        rec[KEY] = json.dumps({k: v for k, v in rec.items() if k not in REPLAY_FIELDS}, sort_keys=True)
    for number, rec in enumerate(lines, start=1):
        if rec.get("schema") != replay.SCHEMA:
            raise ValueError(f"{path}:{number}: schema is {rec.get('schema')!r}, expected {replay.SCHEMA!r}")
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


def replay_table(replays, plans, sweep, fits):
    """Replayed iteration time beside two predictions of it, per plan and node count:
    predicted_* from the Horovod sweep on the replay's own nodes (the model's check), extrapolated_*
    from the ring fit of the study's smallest multi-node sweep (how the extrapolation predicts
    clusters it has not measured). replays: [(path, nodes)]; plans: harness.replay plans."""
    cost_by = costs(sweep, fits)
    horovod = fits[(fits["path"].fillna("mpi") == "horovod") & fits["alpha_s"].notna()].sort_values("ranks")
    ring = horovod.iloc[0] if len(horovod) else None
    by_key = {json.dumps(p["key"], sort_keys=True): p for p in plans}
    rows = []
    for path, nodes in replays:
        for row in read_replay(path, nodes):
            plan = by_key.get(row.pop(KEY, None))
            if plan and not row["failure"]:
                args = (plan["phases"], plan["sizes"], plan["ready"], row["ranks"])
                cost = cost_by.get((nodes, 1))
                if cost is not None:
                    p = predict(*args, cost[0], plan["threshold"], plan["cycle"], cost[1])
                    row["predicted_iteration_s"], row["predicted_comm_exposed_s"] = (
                        p["iteration_s"],
                        p["comm_exposed_s"],
                    )
                    row["error_iteration"] = _relerr(p["iteration_s"], row["iteration_s"])
                    row["error_from_compute"], row["error_from_exposed"] = error_parts(
                        p["iteration_s"], p["comm_exposed_s"], row["iteration_s"], row["comm_exposed_s"]
                    )
                if ring is not None:
                    far = ring_cost(row["ranks"], ring.alpha_s, ring.beta_s_per_byte)
                    row["extrapolated_iteration_s"] = predict(*args, far, plan["threshold"], plan["cycle"])[
                        "iteration_s"
                    ]
                    row["error_extrapolated"] = _relerr(row["extrapolated_iteration_s"], row["iteration_s"])
            rows.append(row)
    return pd.DataFrame(rows).reindex(columns=REPLAY_COLUMNS)


def replay_error(table):
    """Median |relative error| of the replayed iteration time, over replayed configurations."""
    ok = table.dropna(subset=["error_iteration"])
    worst = ok["iteration_ci95"].max()
    return {
        "replays": len(ok),
        "nodes": sorted(int(n) for n in ok["nodes"].unique()),
        "median_abs_error_iteration": _median_abs(ok["error_iteration"]),
        "median_abs_error_extrapolated": _median_abs(ok["error_extrapolated"]),
        "worst_iteration_ci95": None if pd.isna(worst) else float(worst),
        "off_target": off_target(ok, MATCH + ["nodes"]),
    }
