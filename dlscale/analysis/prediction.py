"""The model applied to a study: per run measured against predicted, or why not (model.csv); its error and
the configurations off target, with the reason (model_error.json); the extrapolation (extrapolation.csv)."""

import math
from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np
import pandas as pd

from dlscale.analysis import contention, student
from dlscale.analysis.contention import ASSUMED
from dlscale.analysis.metrics import mean_ci
from dlscale.analysis.model import (
    COMPUTE,
    Cost,
    Gradients,
    Sharing,
    error_parts,
    on_backward,
    predict,
    relative_error,
    ring_cost,
    shared_rate,
    sweep_cost,
)
from dlscale.core import hardware
from dlscale.core.ring import ONE_SUFFIX, TENSORS_SUFFIX
from dlscale.core.vocabulary import BACKWARD_S, COMM_S, CYCLE_TIME_S, FUSION_THRESHOLD_BYTES, RUN_KEYS
from dlscale.core.vocabulary import BASELINE_KEYS as MATCH
from dlscale.workloads.frameworks import HOROVOD, binding_path, sweep_path


def tensor_details(tensors, run):
    """Gradient sizes, ready times (or None) and fusion settings of one run (tensors.csv, its runs.csv row)."""
    mine = tensors.merge(pd.DataFrame([{k: run[k] for k in RUN_KEYS}]), on=RUN_KEYS).sort_values("tensor")
    return {
        "sizes": mine["bytes"].astype(int).tolist(),
        "ready": None if mine["ready_s"].isna().any() or not len(mine) else mine["ready_s"].tolist(),
        "threshold": int(_setting(run, "fusion_threshold_bytes", FUSION_THRESHOLD_BYTES)),
        "cycle": float(_setting(run, "cycle_time_s", CYCLE_TIME_S)),
    }


def _setting(run, key, default):
    """A run's setting from its runs.csv row, or Horovod's default where the row has none."""
    value = run.get(key)
    return default if value is None or pd.isna(value) else value


# The error a configuration may have before model_error.json says why it has more (issue 15's target).
TOLERANCE = 0.05


def _sharing(group):
    """What a reason adds where the model had compute and allreduces share the node's CPUs."""
    rate = group["shared_rate"].median() if "shared_rate" in group else math.nan
    if pd.isna(rate) or rate >= 1:
        return ""
    return f", compute and allreduces ({group['comm_cores'].median():.2g} cores) each at {rate:.0%} while both ran"


def error_interval(group, baselines=None, slowdown=None, confidence=0.95):
    """(lower, upper) of a configuration's median iteration error from the log-mean variances of its runs, its
    baseline's and its slowdown's (x the compute share squared), with Welch-Satterthwaite's degrees of freedom."""
    measured = _log_var(group["iteration_s"])
    if measured[1] < 2:
        return math.nan, math.nan
    predicted = group["predicted_iteration_s"]
    share = ((predicted - group["predicted_comm_exposed_s"]) / predicted).median()
    scaled = [slowdown] if slowdown else []  # the parts the predicted compute scales
    if baselines is not None and len(baselines):
        scaled.append(_log_var(baselines.merge(group[MATCH].drop_duplicates(), on=MATCH)["iteration_s"]))
    parts = [measured] + [(v * share**2, n) for v, n in scaled if n >= 2 and not math.isnan(v)]
    total = sum(v for v, _ in parts)
    df = total**2 / sum(v**2 / (n - 1) for v, n in parts) if total > 0 else len(group) - 1
    half = student.quantile(0.5 + confidence / 2, df) * math.sqrt(total)
    center = 1 + group["error_iteration"].median()
    return center * math.exp(-half) - 1, center * math.exp(half) - 1


def slowdown_spreads(calibrations, confidence=0.95):
    """{contention.key: (variance of the log slowdown, trials)}: each interval's log half-width over its t quantile."""
    out = {}
    for _, r in calibrations.dropna(subset=["slowdown_ci_lo", "slowdown_ci_hi"]).iterrows():
        half = math.log(r["slowdown_ci_hi"] / r["slowdown_ci_lo"]) / 2
        se = half / student.quantile(0.5 + confidence / 2, r["trials"] - 1)
        out[contention.key(r, r["ranks_per_node"])] = (se**2, int(r["trials"]))
    return out


def with_error_intervals(table, spreads=None):
    """model.csv with each predicted configuration's `error_interval` (error_ci_lo, error_ci_hi)."""
    table = table.copy()
    keys, baselines = MATCH + ["nodes", "ranks_per_node"], table[table["ranks"] == 1]
    for _, g in table.dropna(subset=["error_iteration"]).groupby(keys, sort=False):
        spread = (spreads or {}).get(contention.key(g.iloc[0], g.iloc[0]["ranks_per_node"]))
        table.loc[g.index, ["error_ci_lo", "error_ci_hi"]] = error_interval(g, baselines, spread)
    return table


def _log_var(times):
    """(variance of the mean of log `times`, how many), over the positive times."""
    x = np.log(np.asarray([t for t in times if t > 0], dtype=float))
    return (float(x.var(ddof=1)) / len(x) if len(x) >= 2 else math.nan), len(x)


def off_target(table, keys):
    """The configurations (medians over their rows) off by more than TOLERANCE: the larger error part as reason."""
    errors = ["error_iteration", "error_from_compute", "error_from_exposed"]
    cols = ["iteration_s", "comm_exposed_s", "predicted_iteration_s", "predicted_comm_exposed_s", *errors]
    out = []
    for key, group in table.dropna(subset=["error_iteration"]).groupby(keys, sort=True):
        m = group[cols].median()
        if abs(m.error_iteration) <= TOLERANCE:
            continue
        slowdown = group["compute_slowdown"].median() if "compute_slowdown" in group else ASSUMED
        # the runs' median compute, like the error parts (the median iteration less the median exposed mixes runs)
        compute = (group["iteration_s"] - group["comm_exposed_s"]).median()
        if abs(m.error_from_compute) >= abs(m.error_from_exposed):
            reason = (
                f"compute ({m.error_from_compute:+.1%} of the iteration): {compute:.3g} s of compute "
                f"per iteration measured, {m.predicted_iteration_s - m.predicted_comm_exposed_s:.3g} s "
                f"predicted (the 1-rank run's compute x the slowdown of its ranks per node, {slowdown:.3g}"
                f"{_sharing(group)})"
            )
        else:
            reason = (
                f"exposed communication ({m.error_from_exposed:+.1%} of the iteration): "
                f"{m.comm_exposed_s:.3g} s per iteration measured, {m.predicted_comm_exposed_s:.3g} s predicted"
            )
        if "error_ci_lo" in group:  # `with_error_intervals`' interval, else the runs' spread's alone
            lo, hi = group["error_ci_lo"].iloc[0], group["error_ci_hi"].iloc[0]
        else:
            lo, hi = error_interval(group)
        beyond = None if pd.isna(lo) else bool(lo > TOLERANCE or hi < -TOLERANCE)
        if beyond is not None:
            band = "lies beyond" if beyond else "reaches within"
            reason += f"; its 95% interval, {lo:+.1%} to {hi:+.1%}, {band} {TOLERANCE:.0%}"
        out.append(
            {
                **{k: (v.item() if hasattr(v, "item") else v) for k, v in zip(keys, key)},
                "runs": len(group),
                **{c: round(float(m[c]), 4) for c in errors},
                "error_ci_lo": None if pd.isna(lo) else round(lo, 4),
                "error_ci_hi": None if pd.isna(hi) else round(hi, 4),
                "beyond_noise": beyond,
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
    """Per MATCH key, its 1-rank runs' phases, tensor_details and `ready_from`; else why not (NaN or zero phases)."""
    out, unusable, overlapping = {}, {}, set()
    for key, group in table[table["ranks"] == 1].groupby(MATCH, observed=True):
        base = group[COMPUTE].mean()
        native = key[MATCH.index("timing")] == "native"
        if base.isna().any():
            unusable[key] = NO_TRACES if native else NO_PHASES
            continue
        if native:  # traced iterations run under the profiler: scale their phases to the measured iteration
            base = base * group["iteration_s"].mean() / (base.sum() + group[COMM_S].mean())
        if not (np.isfinite(base).all() and base.sum() > 0):
            unusable[key] = ZERO_PHASES
            continue
        out[key] = {**tensor_details(tensors, group.iloc[0]), "base": base.to_dict()}
        out[key]["ready"] = on_backward(out[key]["ready"], base[BACKWARD_S])
        out[key]["input_spread"] = _relative_halfwidth(group["iteration_s"])
        out[key]["ready_from"] = READY_MEASURED if out[key]["ready"] else READY_AFTER
        if _overlaps(group):
            overlapping.add(key)
    for key in overlapping:
        _borrow_ready(out, key)
    return out, unusable


def _overlaps(group):
    """Whether every run of `group` starts allreduces during backward (the flag read as bool, or as text)."""
    flags = group.get("comm_overlaps_backward", pd.Series([False]))
    return bool(flags.astype(str).str.lower().eq("true").all())


def _relative_halfwidth(iterations):
    """Half the 95% interval of the mean of the 1-rank runs' iteration times over that mean (NaN with one run)."""
    mean, lo, hi = mean_ci(iterations.tolist())
    return (hi - lo) / 2 / mean if mean else math.nan


# Where a baseline's gradient ready times come from (model.csv `ready_from`).
READY_MEASURED = "measured: this framework's backward hooks"
READY_AFTER = "end of backward"
READY_BORROWED = "{}'s ready times of the same network, as fractions of backward"
# What a network's gradients must share with another framework's to borrow its ready times.
SAME_NETWORK = ("model", "batch_size", "image_size", "classes", "precision", "threads_per_rank")


def _borrow_ready(out, key):
    """An overlapping baseline without ready times borrows the same network's, as fractions of backward."""
    mine = out[key]
    if mine["ready"] is not None:
        return
    same = [MATCH.index(k) for k in SAME_NETWORK]
    for other, donor in sorted(out.items()):
        fits = donor["ready_from"] == READY_MEASURED and sorted(donor["sizes"]) == sorted(mine["sizes"])
        if other == key or not fits or any(other[i] != key[i] for i in same):
            continue
        fractions = {}
        for size, ready in zip(donor["sizes"], donor["ready"]):
            fractions.setdefault(size, []).append(ready / donor["base"][BACKWARD_S])
        taken = {size: iter(f) for size, f in fractions.items()}  # the k-th of a size (layer orders differ)
        mine["ready"] = [next(taken[size]) * mine["base"][BACKWARD_S] for size in mine["sizes"]]
        mine["ready_from"] = READY_BORROWED.format(other[MATCH.index("framework")])
        return


def study_baselines(runs, status, tensors):
    """The study's successful runs (metrics.run_table joined with runs.csv) and their `baselines`."""
    table = runs.merge(status[status["status"] == "ok"], on=MATCH + ["nodes", "ranks_per_node", "repeat"], how="inner")
    return (table, *baselines(table, tensors))


def costs(sweep, fits):
    """{(nodes, ranks_per_node, library): Cost} from the sweep, else the fit; a failed sweep gives none."""
    out = {}
    failed = sweep_failures(fits)
    # a boolean array: an empty list would select no columns, not no rows
    sweep = sweep[np.array([key not in failed for key in zip(sweep["nodes"], sweep["ranks_per_node"])], dtype=bool)]
    paths = {*sweep["path"].dropna(), *fits["path"].dropna()}
    own = sorted(p for p in paths - {"mpi", HOROVOD} if not p.endswith((TENSORS_SUFFIX, ONE_SUFFIX)))
    for path in ("mpi", HOROVOD, *own):  # horovod after mpi: it wins (older sweeps: mpi only)
        lib = path if path in own else HOROVOD
        mine = fits[fits["path"].fillna("mpi") == path]
        extra = {  # per_tensor_s below 0 is noise
            (r.nodes, r.ranks_per_node): max(0.0, r.per_tensor_s)
            for r in mine.itertuples()
            if not pd.isna(getattr(r, "per_tensor_s", math.nan))
        }
        for r in mine.itertuples():
            if not pd.isna(r.alpha_s):
                key = (r.nodes, r.ranks_per_node)
                out[(*key, lib)] = Cost(ring_cost(r.ranks, r.alpha_s, r.beta_s_per_byte), extra.get(key, 0.0))
        for (nodes, rpn), g in sweep[sweep["path"].fillna("mpi") == path].groupby(["nodes", "ranks_per_node"]):
            if len(g) >= 2:
                alone = _alone(sweep, nodes, rpn, path) if path.startswith(HOROVOD) else {}
                cores = g["cores_used"].median() if "cores_used" in g else math.nan
                cores = 0.0 if pd.isna(cores) else float(cores)  # not recorded: none assumed
                out[(nodes, rpn, lib)] = Cost(
                    sweep_cost(g["bytes"], g["median_s"]), extra.get((nodes, rpn), 0.0), **alone, cores=cores
                )
    return out


def _alone(sweep, nodes, rpn, path=HOROVOD):
    """Cost's alone and alone_from from the one-tensor path of `path` here, or {} (under 2 sizes)."""
    g = sweep[(sweep["path"] == f"{path}{ONE_SUFFIX}") & (sweep["nodes"] == nodes) & (sweep["ranks_per_node"] == rpn)]
    if len(g) < 2:
        return {}
    return {"alone": sweep_cost(g["bytes"], g["median_s"]), "alone_from": float(g["bytes"].min())}


def library(run, place=(), costs=None):
    """The sweep path timing a run's gradients on `place`: through Horovod, its binding's where in `costs`."""
    path = sweep_path(run["framework"], run["allreduce_library"])
    own = binding_path(run["framework"]) if path == HOROVOD else None
    return own if own and (*place, own) in (costs or {}) else path


def sweep_failures(fits):
    """{(nodes, ranks_per_node): why} of the sweeps that failed (allreduce_fit.csv)."""
    rows = fits.fillna({"failure": ""}).itertuples()
    return {(r.nodes, r.ranks_per_node): r.failure for r in rows if getattr(r, "failure", "")}


def not_predicted(run, bases, unusable, cost_by, failures):
    """Why the model predicts no time for this run (a model.csv row's run), or "" when it does."""
    key, place = tuple(run[k] for k in MATCH), (run["nodes"], run["ranks_per_node"])
    where = f"on {place[0]} node(s) x {place[1]} rank(s) per node"
    if run["ranks"] < 2:
        return BASELINE_ITSELF
    if key in unusable:
        return unusable[key]
    if key not in bases:
        return NO_BASELINE
    if place in failures:
        return f"allreduce sweep {where} failed: {failures[place]}"
    if (*place, library(run, place, cost_by)) not in cost_by:
        return f"no {library(run)} allreduce time measured {where} (allreduce.csv)"
    return ""


def node_cpus(run):
    """The CPUs a node's ranks share (None: not recorded): the fewest over hosts, of affinity x ranks if fewer."""
    cell = run.get("hardware")
    hosts = hardware.hosts([cell]) if isinstance(cell, str) else {}
    cpus = [_host_cpus(h, run.get("ranks_per_node")) for h in hosts.values() if h.get("logical_cpus")]
    return min(cpus) if cpus else None


def _host_cpus(host, ranks_per_node):
    allowed = host.get("cpus_allowed")
    if not allowed or not ranks_per_node or pd.isna(ranks_per_node):  # recorded before ranks said
        return host["logical_cpus"]
    return min(host["logical_cpus"], int(ranks_per_node) * allowed)


def slowdown_for(run, slowdowns):
    """(compute slowdown, where it came from): 1 with one rank per node, else the calibration's or ASSUMED."""
    rpn = run["ranks_per_node"]
    if rpn == 1:
        return 1.0, "one rank per node"
    measured = slowdowns.get(contention.key(run, rpn))
    if measured is None:
        return ASSUMED, f"assumed {ASSUMED:g} (no calibration of {rpn} ranks per node: contention.csv)"
    return measured, "measured (contention.csv)"


@dataclass(frozen=True)
class Node:
    """What sharing a node costs in model_table: `slowdowns` (contention.slowdowns; none: every shared node as
    fast as one rank alone) and `sharing(run, rate)`, the rates (a model.Sharing) to predict a run with in place
    of the processor-sharing rule's `rate` (None: the rule's)."""

    slowdowns: dict = field(default_factory=dict)
    sharing: Callable | None = None


def model_table(runs, status, tensors, sweep, fits, node=Node()):
    """(model.csv, `baselines`, those without one), the node's sharing as `node` (a Node) says."""
    table, bases, unusable = study_baselines(runs, status, tensors)
    cost_by, failures = costs(sweep, fits), sweep_failures(fits)
    rows = []
    for r in table.to_dict("records"):
        seq = r["allreduce_schedule"] == "sequential" or r["ranks"] == 1
        if r["timing"] == "native":  # from the traces: all allreduce time, and the part during compute
            total = r.get("comm_total_s", math.nan)
            ratio = r.get("overlap_s", math.nan) / total if total and total > 0 else math.nan
        else:
            total = r[COMM_S] if seq else r.get("timeline_comm_s", math.nan)
            ratio = 1 - r[COMM_S] / total if total and total > 0 else math.nan
        row = {k: r.get(k) for k in COLUMNS[: COLUMNS.index("iteration_s")]}
        row.update(iteration_s=r["iteration_s"], comm_total_s=total, comm_exposed_s=r[COMM_S], overlap_ratio=ratio)
        row["not_predicted"] = not_predicted(r, bases, unusable, cost_by, failures)
        row["compute_slowdown"], row["slowdown_source"] = slowdown_for(r, node.slowdowns)
        if not row["not_predicted"]:
            base = bases[tuple(r[k] for k in MATCH)]
            place = (r["nodes"], r["ranks_per_node"])
            cost = cost_by[(*place, library(r, place, cost_by))]
            ready = None if seq else base["ready"]
            row["ready_from"] = "sequential: after backward" if seq else base["ready_from"]
            rate = shared_rate(r["threads_per_rank"], r["ranks_per_node"], node_cpus(r), cost.cores)
            rate = node.sharing(r, rate) if node.sharing else rate
            row["comm_cores"], row["shared_rate"] = cost.cores, Sharing.of(rate).compute
            p = predict(base["base"], Gradients.of(base, ready), r["ranks"], cost, row["compute_slowdown"], rate)
            row.update({f"predicted_{k}": v for k, v in p.items()})
            row["error_iteration"] = relative_error(p["iteration_s"], r["iteration_s"])
            row["error_comm_total"] = relative_error(p["comm_total_s"], total)
            row["error_from_compute"], row["error_from_exposed"] = error_parts(
                p["iteration_s"], p["comm_exposed_s"], r["iteration_s"], r[COMM_S]
            )
        rows.append(row)
    return pd.DataFrame(rows).reindex(columns=COLUMNS), bases, unusable


COLUMNS = MATCH + ["nodes", "ranks_per_node", "ranks", "repeat", "grad_tensors", "grad_bytes", "link_rate_mbit"]
COLUMNS += ["iteration_s", "comm_total_s", "comm_exposed_s", "overlap_ratio"]
COLUMNS += ["compute_slowdown", "slowdown_source", "comm_cores", "shared_rate", "ready_from"]
COLUMNS += ["predicted_iteration_s", "predicted_comm_total_s", "predicted_comm_exposed_s"]
COLUMNS += ["error_iteration", "error_comm_total", "error_from_compute", "error_from_exposed"]
COLUMNS += ["error_ci_lo", "error_ci_hi", "not_predicted"]


def median_abs(values):
    """The median |value| as a number, or None (JSON's null, not NaN) where there is none."""
    m = values.abs().median()
    return None if pd.isna(m) else float(m)


def model_error(table):
    """model_error.json: median |error| (overall, `by_library`), `off_target`, runs not predicted by why, `reason`."""
    pred = table.dropna(subset=["error_iteration"])
    multi = table[table["ranks"] > 1]
    missed = multi["not_predicted"].fillna("")
    out = {
        **_medians(pred),
        "off_target": off_target(pred, MATCH + ["nodes", "ranks_per_node"]),
        "not_predicted": {k: int(v) for k, v in missed[missed != ""].value_counts().sort_index().items()},
        "by_library": {lib: _medians(g) for lib, g in pred.groupby("allreduce_library", sort=True)},
    }
    if not len(pred):
        if table.empty:
            out["reason"] = "no successful run"
        elif multi.empty:
            out["reason"] = "no run with 2 or more ranks"
        else:
            out["reason"] = "; ".join(out["not_predicted"]) or "no predicted run has a measured time to compare"
    return out


def _medians(pred):
    """How many predicted runs, and their median |error| of iteration and communication time."""
    return {
        "runs": len(pred),
        "median_abs_error_iteration": median_abs(pred["error_iteration"]),
        "median_abs_error_comm_total": median_abs(pred["error_comm_total"]),
    }


def error_band(ext, table):
    """The extrapolation with the study's median |error| per framework and network and the band it gives."""
    keys = ["framework", "model"]
    if not len(table) or "error_iteration" not in table:
        errors = pd.DataFrame(columns=[*keys, "model_error"])
    else:
        measured = table.dropna(subset=["error_iteration"]).assign(error=lambda d: d["error_iteration"].abs())
        errors = measured.groupby(keys, as_index=False)["error"].median().rename(columns={"error": "model_error"})
    out = ext.merge(errors, on=keys, how="left")
    lo = out.get("input_efficiency_lo", out["predicted_efficiency"]).fillna(out["predicted_efficiency"])
    hi = out.get("input_efficiency_hi", out["predicted_efficiency"]).fillna(out["predicted_efficiency"])
    # an error over 100% (the model twice off) leaves no lower bound: 0, never a negative efficiency
    out["predicted_efficiency_lo"] = (lo * (1 - out["model_error"])).clip(lower=0)
    out["predicted_efficiency_hi"] = hi * (1 + out["model_error"])
    return out


def extrapolate(bases, links, max_ranks=1024):
    """Weak-scaling efficiency T(1)/T(N) over each link (the ring's slowest hop, one rank per node)."""
    rows = []
    for key, b in bases.items():
        ident = dict(zip(MATCH, key))
        for name, link in links.items():
            alpha, beta = link["latency_us"] * 1e-6, 8 / (link["gbit_s"] * 1e9)
            for n in (2**k for k in range(1, max_ranks.bit_length())):  # 2, 4, ... up to max_ranks
                rows.append({**ident, "link": name, "ranks": n, **_efficiency(b, ident, n, ring_cost(n, alpha, beta))})
    return pd.DataFrame(rows, columns=MATCH + ["link", "ranks", *EXTRAPOLATED])


EXTRAPOLATED = ["predicted_iteration_s", "predicted_efficiency", "input_efficiency_lo", "input_efficiency_hi"]


def _efficiency(b, ident, ranks, cost):
    """`b`'s predicted iteration and efficiency on `ranks`, and the efficiency at either end of its `input_spread`."""
    ready = None if ident["allreduce_schedule"] == "sequential" else b["ready"]
    single = sum(b["base"].values())

    def at(scale):
        p = predict(b["base"], Gradients.of(b, ready), ranks, cost, slowdown=scale)
        return p["iteration_s"], single * scale / p["iteration_s"]

    iteration, efficiency = at(1.0)
    spread = b.get("input_spread", math.nan)
    # the point itself too: Horovod's whole cycles make the efficiency step, not always monotone, in the scale
    ends = [at(1 - spread)[1], efficiency, at(1 + spread)[1]] if 0 < spread < 1 else [math.nan]
    return dict(zip(EXTRAPOLATED, [iteration, efficiency, min(ends), max(ends)]))
