"""Timing maths (weak scaling): a run's iteration time is its slowest rank's; costs are averaged over repeats,
rates by the harmonic mean, the cost's interval carried through (Hoefler, Belli SC15). docs/concepts/statistics.md."""

import math
import warnings
from typing import NamedTuple

import numpy as np
import pandas as pd

from dlscale.analysis import student
from dlscale.core.processes import CORES_ALLOWANCE
from dlscale.core.samples import steady_start
from dlscale.core.vocabulary import BASELINE_KEYS, CONFIG_KEYS, PHASE_COLUMNS, RUN_KEYS, seconds

NOISE_CV = 0.05
PRECISION = 0.05
ALPHA = 0.05  # the normality test's level
BOOTSTRAP = 10000
# Fewer repeats than this are not resampled: a bootstrap of 3 values has at most 10 distinct means
# and gave a 3.1%-CV configuration an interval of +-2.7% (2026-11-27 example); t on the log scale then.
MIN_BOOTSTRAP = 10
FAR_OUT = 3.0  # Tukey's fence for far-out values, in interquartile ranges above the third quartile


def mean_ci(values, confidence=0.95):
    """(mean, lower, upper) of the mean; the interval is NaN with fewer than two values."""
    x = np.asarray([v for v in values if v is not None and not math.isnan(v)], dtype=float)
    mean = float(x.mean()) if len(x) else math.nan
    if len(x) < 2:
        return mean, math.nan, math.nan
    half = student.quantile(0.5 + confidence / 2, len(x) - 1) * x.std(ddof=1) / math.sqrt(len(x))
    return mean, mean - half, mean + half


def log_ci(x, confidence=0.95):
    """(mean, lower, upper) of positive values: mean x exp(+- t x se / mean) (delta method), always positive."""
    mean = float(np.mean(x))
    half = student.quantile(0.5 + confidence / 2, len(x) - 1) * np.std(x, ddof=1) / math.sqrt(len(x)) / mean
    return mean, mean * math.exp(-half), mean * math.exp(half)


def interval(values, confidence=0.95, seed=0):
    """(mean, lower, upper, method): t where Shapiro-Wilk keeps normality, else a bootstrap (few values: log t)."""
    x = np.asarray([v for v in values if v is not None and not math.isnan(v)], dtype=float)
    mean, lo, hi = mean_ci(x, confidence)
    if len(x) < 2:
        return mean, lo, hi, f"none ({len(x)} repeat)"
    if lo <= 0 < mean:  # a positive cost's interval must stay positive: t on the log scale instead
        return (*log_ci(x, confidence), "t on the log scale (the plain t interval reached 0)")
    if len(x) < 3:
        return mean, lo, hi, "t (2 repeats: normality untested)"
    from scipy import stats  # where it is needed (student.py)

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # identical values: no test needed, and scipy says so
        p = stats.shapiro(x).pvalue if np.ptp(x) > 0 else 1.0
    if p >= ALPHA:
        return mean, lo, hi, f"t (Shapiro-Wilk p={p:.2f})"
    if len(x) < MIN_BOOTSTRAP:
        return (*log_ci(x, confidence), f"t on the log scale (Shapiro-Wilk p={p:.3f}; too few repeats to bootstrap)")
    means = np.random.default_rng(seed).choice(x, (BOOTSTRAP, len(x))).mean(axis=1)
    lo, hi = np.quantile(means, [0.5 - confidence / 2, 0.5 + confidence / 2])
    return mean, float(lo), float(hi), f"bootstrap (Shapiro-Wilk p={p:.3f})"


def harmonic_rate(work, cost_mean, cost_lo, cost_hi):
    """(rate, lower, upper) of `work` per unit cost from the mean cost and its interval (harmonic mean)."""
    # a cost bound at zero time or below bounds no rate: unresolved (NaN), never infinite
    return tuple(math.nan if c is None or math.isnan(c) or c <= 0 else work / c for c in (cost_mean, cost_hi, cost_lo))


def outliers(times, fence=FAR_OUT):
    """How many of `times` are far out: above the third quartile + `fence` interquartile ranges."""
    q1, q3 = np.quantile(times, [0.25, 0.75])
    return int((np.asarray(times) > q3 + fence * (q3 - q1)).sum())


# run_metrics.csv, one row per run (`run_table`).
_RUN_VALUES = ["iteration_s", "iteration_s_median", "iteration_s_p95", "outlier_iterations", "iterations"]
RUN_METRICS_COLUMNS = RUN_KEYS + _RUN_VALUES + ["unsteady_iterations", "ranks", "throughput_img_per_s"]
RUN_METRICS_COLUMNS += [seconds(p) for p in PHASE_COLUMNS]


def steady_steps(tidy):
    """(each run's steady iteration times: the slowest rank's wall time of its measured iterations, a Series by
    RUN_KEYS + iteration; each run's unsteady_iterations), what run_table's times come from."""
    measured = tidy[~tidy["warmup"].astype(bool)]
    # throughput from the measured iterations only: never the traced (profiled) ones
    wall = measured[(measured["phase"] == "wall") & ~measured["profiled"].astype(bool)]
    step = wall.groupby(RUN_KEYS + ["iteration"], observed=True)["seconds"].max()
    # beyond the configured warm-up, the leading iterations above the run's steady level are dropped too
    drop = step.groupby(RUN_KEYS, observed=True).transform(lambda t: steady_start(t.to_numpy()))
    position = step.groupby(RUN_KEYS, observed=True).cumcount()
    steady = drop.groupby(RUN_KEYS, observed=True).first().rename("unsteady_iterations").reset_index()
    return step[position >= drop], steady


def run_table(tidy):
    """One row per run: mean iteration time, throughput and mean phase times (measured iterations)."""
    measured = tidy[~tidy["warmup"].astype(bool)]
    if measured.empty:
        return pd.DataFrame(columns=RUN_METRICS_COLUMNS)
    step, steady = steady_steps(tidy)
    spread = {"iteration_s_median": "median", "iteration_s_p95": lambda t: t.quantile(0.95)}
    by_run = step.groupby(RUN_KEYS, observed=True)
    runs = by_run.agg(iteration_s="mean", **spread, outlier_iterations=outliers, iterations="count").reset_index()
    runs = runs.merge(steady, on=RUN_KEYS, how="left")
    runs["ranks"] = runs["nodes"] * runs["ranks_per_node"]
    images = runs["ranks"] * runs["batch_size"]
    # an iteration recorded as taking no time has no rate (rather than an infinite one)
    runs["throughput_img_per_s"] = (images / runs["iteration_s"]).where(runs["iteration_s"] > 0)
    # phases: phased runs' measured iterations, native runs' traced iterations (from the traces)
    phased = measured[measured["phase"].isin(PHASE_COLUMNS)]
    phases = phased.groupby(RUN_KEYS + ["phase"], observed=True)["seconds"].mean().unstack("phase")
    phases = phases.reindex(columns=list(PHASE_COLUMNS))
    phases.columns = [seconds(p) for p in phases.columns]
    return runs.merge(phases.reset_index(), on=RUN_KEYS, how="left").reindex(columns=RUN_METRICS_COLUMNS)


def summarize(runs, status=None):
    """One row per configuration: means and CIs over repeats, speedup, efficiency; `status` (runs.csv) adds failures."""
    summary = _configurations(runs)
    cvs, rels = summary["iteration_s_cv"].fillna(0), summary["iteration_s_ci_rel"].fillna(0)
    summary["noise_warning"] = [_noise_warning(*found) for found in zip(cvs, rels, summary["repeats_needed"])]
    if status is not None and len(status):
        for add in (_add_failures, add_loader, add_cores, add_samples):
            summary = add(summary, status)
    return add_scaling(summary)


def _configurations(runs):
    """One row per configuration of the ok runs: means and CIs over repeats (iteration_s's method), its noise."""
    costs = ["iteration_s"] + [seconds(p) for p in PHASE_COLUMNS]
    value_cols = ["iteration_s", "throughput_img_per_s"] + costs[1:]
    rows = []
    for key, group in runs.groupby(CONFIG_KEYS, observed=True):
        row = dict(zip(CONFIG_KEYS, key))
        row["ranks"] = int(group["ranks"].iloc[0])
        row["repeats_ok"] = len(group)
        for col in costs:
            row[col], row[f"{col}_ci_lo"], row[f"{col}_ci_hi"], row[f"{col}_ci_method"] = interval(group[col])
        images = row["ranks"] * row["batch_size"]
        rate = harmonic_rate(images, row["iteration_s"], row["iteration_s_ci_lo"], row["iteration_s_ci_hi"])
        row["throughput_img_per_s"], row["throughput_img_per_s_ci_lo"], row["throughput_img_per_s_ci_hi"] = rate
        row["throughput_se"] = row["throughput_img_per_s"] * _se(group["iteration_s"]) / row["iteration_s"]
        row["iteration_s_median"] = float(group["iteration_s_median"].median())
        row |= {c: int(group[c].sum()) for c in ("outlier_iterations", "unsteady_iterations")}
        row["iteration_s_cv"] = cv(group["iteration_s"])
        row["iteration_s_ci_rel"] = (row["iteration_s"] - row["iteration_s_ci_lo"]) / row["iteration_s"]
        row["repeats_needed"] = repeats_needed(row["iteration_s_cv"])
        rows.append(row)
    values = [c for col in value_cols for c in (col, f"{col}_ci_lo", f"{col}_ci_hi")]
    spread = ["iteration_s_ci_method", "iteration_s_median", "outlier_iterations", "unsteady_iterations"]
    noise = ["throughput_se", "iteration_s_cv", "iteration_s_ci_rel", "repeats_needed"]
    return pd.DataFrame(rows, columns=CONFIG_KEYS + ["ranks", "repeats_ok"] + values + spread + noise)


def _noise_warning(cv, rel, need):
    """What is wrong with a configuration's iteration time (CV, interval); empty where nothing."""
    noisy = f"run-to-run CV of iteration time {cv:.1%} > {NOISE_CV:.0%}: differences below that are noise"
    wide = f"95% interval of the iteration time +-{rel:.1%} of the mean > {PRECISION:.0%}: about {need:.0f} repeats"
    found = ((noisy, cv > NOISE_CV), (f"{wide} would bring it within", rel > PRECISION))
    return "; ".join(text for text, wrong in found if wrong)


def _add_failures(summary, status):
    """The summary with failed runs counted and their reasons joined (a row for a configuration with no ok run)."""
    failed = status[status["status"] != "ok"]
    by_config = failed.groupby(CONFIG_KEYS, observed=True, dropna=False)  # a run known by its path alone too
    reasons = ("reasons", lambda r: " | ".join(sorted(set(r))))
    fails = by_config.agg(repeats_failed=("status", "size"), failure_reasons=reasons).reset_index()
    summary = summary.merge(fails, on=CONFIG_KEYS, how="outer")
    summary["repeats_failed"] = summary["repeats_failed"].fillna(0).astype(int)
    summary["repeats_ok"] = summary["repeats_ok"].fillna(0).astype(int)
    summary["failure_reasons"] = summary["failure_reasons"].fillna("")
    summary["ranks"] = summary["nodes"] * summary["ranks_per_node"]
    return summary


def add_mfu(summary, peak, flops):
    """Model FLOP utilisation: a rank's FLOP rate (flops.csv) over its framework's multiply rate there (peak.csv)."""
    keys = ["model", "image_size", "classes"]
    work = flops[keys + ["train_flops"]].rename(columns={"train_flops": "train_flops_per_image"})
    # a failed run known by its path alone (status.json unreadable) has no image size: no FLOPs
    summary = summary.drop(columns=["train_flops_per_image"], errors="ignore").merge(work, on=keys, how="left")
    keys = list(zip(summary["framework"], summary["threads_per_rank"]))
    # the probe's rate, its cores and its rate bound to that many CPUs (a peak.csv of before has the rate alone)
    for column, source in (("matmul_flops_s",) * 2, ("matmul_cores_used", "cores_used"), ("matmul_flops_s_bound",) * 2):
        found = dict(zip(zip(peak["framework"], peak["threads"]), peak[source])) if source in peak else {}
        summary[column] = [found.get(k, math.nan) for k in keys]
    per_rank = summary["throughput_img_per_s"] / summary["ranks"]
    summary["mfu"] = per_rank * summary["train_flops_per_image"] / summary["matmul_flops_s"]
    return summary


LOADER_RATE = ["loader_img_per_s", "loader_img_per_s_ci_lo", "loader_img_per_s_ci_hi"]


def add_loader(summary, status):
    """The loaders' own rate (its interval as a cost's) and `loader_utilisation`: near 1, input-bound."""
    if "loader_img_per_s" not in status:
        return summary
    ok = status[status["status"] == "ok"]
    ok = ok.assign(loader_img_per_s=pd.to_numeric(ok["loader_img_per_s"], errors="coerce"))
    rates = ok.groupby(CONFIG_KEYS, observed=True)["loader_img_per_s"]
    rate = rates.apply(lambda r: pd.Series(interval(r.tolist())[:3], index=LOADER_RATE)).unstack().reset_index()
    summary = summary.merge(rate, on=CONFIG_KEYS, how="left")
    summary["loader_utilisation"] = summary["throughput_img_per_s"] / summary["ranks"] / summary["loader_img_per_s"]
    return summary


def add_cores(summary, status):
    """The cores a rank used against `cores_given`; synthetic data has no loader: its workers get no core."""
    if "cores_used" not in status:
        return summary
    ok = status[status["status"] == "ok"].assign(
        cores_used=lambda d: pd.to_numeric(d["cores_used"], errors="coerce"),
        loader=lambda d: d["loader_workers"] * (d["data"] != "synthetic") if "data" in d else d["loader_workers"],
    )
    cores = ok.groupby(CONFIG_KEYS, observed=True).agg(cores_used=("cores_used", "mean"), loader=("loader", "max"))
    summary = summary.merge(cores.reset_index(), on=CONFIG_KEYS, how="left")
    summary["cores_given"] = summary["threads_per_rank"] + summary.pop("loader") + CORES_ALLOWANCE
    summary["cores_over"] = summary["cores_used"] > summary["cores_given"]
    return summary


def add_samples(summary, status):
    """With `samples`: how many ok runs of each configuration met the target, and their widest interval."""
    if "samples_stopped_by" not in status or status["samples_target"].isna().all():
        return summary
    ok = status[status["status"] == "ok"].assign(
        met=lambda d: d["samples_stopped_by"] == "target",
        median_ci_rel=lambda d: pd.to_numeric(d["median_ci_rel"], errors="coerce"),
    )
    by_config = ok.groupby(CONFIG_KEYS, observed=True)
    met = by_config.agg(runs_target_met=("met", "sum"), median_ci_rel_max=("median_ci_rel", "max"))
    return summary.merge(met.reset_index(), on=CONFIG_KEYS, how="left")


def _se(values):
    x = np.asarray(values.dropna(), dtype=float)
    return float(x.std(ddof=1) / math.sqrt(len(x))) if len(x) >= 2 else math.nan


def repeats_needed(cv, target=PRECISION, most=1000):
    """The fewest repeats (>= 2) whose 95% interval of the mean is within `target` of it at this CV."""
    if cv is None or math.isnan(cv):
        return math.nan
    for n in range(2, most + 1):
        if student.quantile(0.975, n - 1) * cv / math.sqrt(n) <= target:
            return n
    return most


def cv(values):
    """Run-to-run coefficient of variation (NaN with fewer than two values)."""
    x = np.asarray(values.dropna(), dtype=float)
    return float(x.std(ddof=1) / x.mean()) if len(x) >= 2 and x.mean() > 0 else math.nan


class Mean(NamedTuple):
    value: float
    se: float
    n: int


def ratio_ci(a, b, confidence=0.95):
    """(a/b, lower, upper) of two independent positive Means: a/b x exp(+- t sqrt((se_a/a)^2 + (se_b/b)^2))."""
    ratio = a.value / b.value if b.value else math.nan
    if min(a.n, b.n) < 2 or any(math.isnan(v) for v in (ratio, a.se, b.se)) or a.value <= 0 or b.value <= 0:
        return ratio, math.nan, math.nan
    t = student.quantile(0.5 + confidence / 2, min(a.n, b.n) - 1)
    half = t * math.sqrt((a.se / a.value) ** 2 + (b.se / b.value) ** 2)
    return ratio, ratio * math.exp(-half), ratio * math.exp(half)


def add_scaling(summary):
    """speedup and efficiency (with intervals) against the 1-rank configuration with the same BASELINE_KEYS."""
    names = {"throughput_img_per_s": "base_", "throughput_se": "base_se_", "repeats_ok": "base_n_"}
    base = summary[summary["ranks"] == 1][BASELINE_KEYS + list(names)].rename(columns=names)
    out = summary.merge(base, on=BASELINE_KEYS, how="left")
    out["noise_warning"] = out["noise_warning"].fillna("")
    mine = zip(out["throughput_img_per_s"], out["throughput_se"], out["repeats_ok"])
    cis = [ratio_ci(Mean(*a), Mean(*b)) for a, b in zip(mine, zip(out["base_"], out["base_se_"], out["base_n_"]))]
    out["speedup"], out["speedup_ci_lo"], out["speedup_ci_hi"] = ([c[i] for c in cis] for i in range(3))
    for col in ("", "_ci_lo", "_ci_hi"):
        out[f"efficiency{col}"] = out[f"speedup{col}"] / out["ranks"]
    one = out["ranks"] == 1  # against itself: exactly 1
    out.loc[one, ["speedup_ci_lo", "speedup_ci_hi", "efficiency_ci_lo", "efficiency_ci_hi"]] = math.nan
    for r in out[out["noise_warning"] != ""].itertuples():
        where = f"{r.framework} {r.model} {r.allreduce_schedule} {r.layout} {r.timing} {r.ranks} ranks"
        warnings.warn(f"{where}: {r.noise_warning}", stacklevel=2)
    return out.drop(columns=list(names.values())).sort_values(CONFIG_KEYS).reset_index(drop=True)
