"""Two frameworks or libraries compared per configuration: by the block model (blocks.py: the verdict), paired
(`_paired`) and independent (`_independent`), the last two Holm-adjusted over the study. docs/concepts/statistics.md"""

import itertools
import math

import numpy as np
import pandas as pd

from dlscale.analysis import blocks, student
from dlscale.analysis.verdicts import ALPHA, CONFIDENCE, EQUAL, MOST_BLOCKS, RATE, RESOLVED, verdict
from dlscale.core.vocabulary import CONFIG_KEYS
from dlscale.workloads.frameworks import HOROVOD, NATIVE, default_library

_SIDE = ["img_per_s", "img_per_s_ci_lo", "img_per_s_ci_hi", "img_per_s_se", "repeats"]  # each side's columns, a_ b_


def log_interval(mean_log, se_log, df, confidence=CONFIDENCE):
    """(ratio, lower, upper) from the log ratio's mean and standard error: exp(m +- t se), always positive."""
    ratio = math.exp(mean_log) if np.isfinite(mean_log) else math.nan
    if not (np.isfinite(se_log) and df >= 1):
        return ratio, math.nan, math.nan
    half = student.quantile(0.5 + confidence / 2, df) * se_log
    return ratio, math.exp(mean_log - half), math.exp(mean_log + half)


def tests(mean_log, se_log, df, band=EQUAL):
    """(p of ratio = 1, p of ratio outside `band`): a two-sided t test and TOST; NaN without a standard error."""
    if not (np.isfinite(mean_log) and np.isfinite(se_log) and df >= 1):
        return math.nan, math.nan
    lo, hi = math.log(band[0]), math.log(band[1])
    if se_log == 0:  # identical ratios in every block: the tests are exact
        return (0.0 if mean_log != 0 else 1.0), (0.0 if lo < mean_log < hi else 1.0)
    p_diff = 2 * student.sf(abs(mean_log) / se_log, df)
    p_equal = max(student.sf((mean_log - lo) / se_log, df), student.sf((hi - mean_log) / se_log, df))
    return float(p_diff), float(p_equal)


def holm(pvalues):
    """Holm's step-down adjusted p-values (NaN stays NaN and does not count in the family)."""
    p = np.asarray(pvalues, dtype=float)
    out = np.full(len(p), math.nan)
    known = np.flatnonzero(~np.isnan(p))
    order = known[np.argsort(p[known], kind="stable")]
    steps = np.minimum(1.0, (len(order) - np.arange(len(order))) * p[order])
    out[order] = np.maximum.accumulate(steps)  # step-down: never below an earlier step
    return out


def blocks_needed(mean_log, sd_log, level, band=EQUAL, most=MOST_BLOCKS):
    """The fewest blocks (>= 2) resolving a paired comparison at `level`; `most` + 1 out of reach, NaN without sd."""
    if not (np.isfinite(mean_log) and np.isfinite(sd_log)):
        return math.nan
    for n in range(2, most + 1):
        p_diff, p_equal = tests(mean_log, sd_log / math.sqrt(n), n - 1, band)
        if min(p_diff, p_equal) < level:
            return n
    return most + 1


def paired(a_runs, b_runs, keys):
    """Per configuration (`keys`) both sides ran: the blocks both ran, their log ratios' mean and sd."""
    both = a_runs[keys + ["repeat", RATE]].merge(b_runs[keys + ["repeat", RATE]], on=keys + ["repeat"])
    both = both[(both[f"{RATE}_x"] > 0) & (both[f"{RATE}_y"] > 0)]
    both["log_ratio"] = np.log(both[f"{RATE}_x"] / both[f"{RATE}_y"])
    by_config = both.groupby(keys, observed=True, dropna=False)["log_ratio"]
    return by_config.agg(blocks="count", mean_log="mean", sd_log="std").reset_index()


def independent(a_summary, b_summary, keys):
    """Per configuration both sides ran: each side's summary and the log ratio's mean, se and df."""
    cols = ["allreduce_library", RATE, f"{RATE}_ci_lo", f"{RATE}_ci_hi", "throughput_se", "repeats_ok"]
    names = ["library", *_SIDE]

    def one_side(summary, side):
        return summary[keys + cols].rename(columns={c: f"{side}_{n}" for c, n in zip(cols, names)})

    both = one_side(a_summary, "a").merge(one_side(b_summary, "b"), on=keys)
    both["mean_log_independent"] = np.log(both["a_img_per_s"] / both["b_img_per_s"])
    rel_se = [both[f"{side}_img_per_s_se"] / both[f"{side}_img_per_s"] for side in "ab"]
    both["se_log_independent"] = np.sqrt(rel_se[0] ** 2 + rel_se[1] ** 2)
    both["df_independent"] = np.minimum(both["a_repeats"], both["b_repeats"]) - 1
    return both


def _pick(table, dimension, level, where):
    """The rows of `level` of `dimension`, filtered by `where(level)` (a dict of column: value)."""
    mask = table[dimension] == level
    for col, value in where(level).items():
        mask &= table[col] == value
    return table[mask]


def pairs(summary, runs, dimension, a, b, where=lambda level: {}):
    """Every configuration run with level `a` and level `b` of `dimension`: the per-pair analyses' rows."""
    drop = {dimension} | ({"allreduce_library"} if dimension == "framework" else set())
    keys = [k for k in CONFIG_KEYS if k not in drop] + ["ranks"]
    ok = summary[summary["repeats_ok"] > 0]
    sa, sb, ra, rb = (_pick(t, dimension, level, where) for t in (ok, runs) for level in (a, b))
    by_block = paired(*(r.assign(ranks=r["nodes"] * r["ranks_per_node"]) for r in (ra, rb)), keys)
    table = independent(sa, sb, keys).merge(by_block, on=keys, how="left")
    table["blocks"] = table["blocks"].fillna(0).astype(int)
    return table.assign(dimension=dimension, a=a, b=b)


def decide(table, alpha=ALPHA):
    """The per-pair analyses over `table` (the study's whole family for Holm); no block model yet."""
    if table.empty:
        return pd.DataFrame(columns=COLUMNS)
    out = table.copy()
    se_paired = out["sd_log"] / np.sqrt(out["blocks"].where(out["blocks"] > 0))
    for name, mean, se, df in (
        ("_paired", out["mean_log"], se_paired, out["blocks"] - 1),
        ("_independent", out["mean_log_independent"], out["se_log_independent"], out["df_independent"]),
    ):
        intervals = [log_interval(m, s, d) for m, s, d in zip(mean, se, df)]
        out[f"ratio{name}"], out[f"ratio{name}_ci_lo"], out[f"ratio{name}_ci_hi"] = zip(*intervals)
        p = np.array([tests(m, s, d) for m, s, d in zip(mean, se, df)], dtype=float).reshape(-1, 2)
        adjusted = holm(p.ravel()).reshape(-1, 2)
        out[f"p{name}"], out[f"p_holm{name}"], out[f"p_equal_holm{name}"] = p[:, 0], adjusted[:, 0], adjusted[:, 1]
        out[f"verdict{name}"] = [verdict(r, d, e, alpha) for r, d, e in zip(out[f"ratio{name}"], *adjusted.T)]
    hypotheses = max(2, 2 * int(np.isfinite(out["p_paired"]).sum()))  # the paired family's size
    out["blocks_needed_paired"] = [
        (math.nan if v in RESOLVED else blocks_needed(m, s, alpha / hypotheses))
        for v, m, s in zip(out["verdict_paired"], out["mean_log"], out["sd_log"])
    ]
    return out.reindex(columns=COLUMNS)


def with_block_model(table, runs, alpha=ALPHA):
    """`decide`'s table with the block model's columns for each comparison (its cells' pair)."""
    rows, _ = blocks.pair_rows(runs, alpha)
    if table.empty or rows.empty:
        return table
    decided = pd.concat([rows[blocks.KEYS + ["a", "b"]], blocks.decide(rows, alpha)], axis=1)
    flipped = decided.rename(columns={"a": "b", "b": "a", "ratio_ci_lo": "ratio_ci_hi", "ratio_ci_hi": "ratio_ci_lo"})
    flipped[["ratio", "ratio_ci_lo", "ratio_ci_hi"]] = 1 / flipped[["ratio", "ratio_ci_lo", "ratio_ci_hi"]]
    flipped["verdict"] = flipped["verdict"].replace({"a faster": "b faster", "b faster": "a faster"})
    both = pd.concat([decided, flipped], ignore_index=True).rename(columns={"a": "cell_a", "b": "cell_b"})
    by_framework = table["dimension"] == "framework"  # each comparison's two cells as the block model names them
    a = np.where(by_framework, table["a"], table["framework"]), np.where(by_framework, table["a_library"], table["a"])
    b = np.where(by_framework, table["b"], table["framework"]), np.where(by_framework, table["b_library"], table["b"])
    keyed = table.drop(columns=BLOCK_MODEL).assign(cell_a=list(zip(*a)), cell_b=list(zip(*b)))
    merged = keyed.merge(both, on=blocks.KEYS + ["cell_a", "cell_b"], how="left", validate="one_to_one")
    return merged.reindex(columns=COLUMNS)


def study(summary, runs, alpha=ALPHA):
    """comparisons.csv: every pair of frameworks (each at its default library), each framework's native / horovod."""
    ok = summary[summary["repeats_ok"] > 0]
    names = sorted(ok["framework"].unique())
    tables = [
        pairs(ok, runs, "framework", a, b, lambda fw: {"allreduce_library": default_library(fw)})
        for a, b in itertools.combinations(names, 2)
    ]
    tables += [
        pairs(ok[ok["framework"] == fw], runs[runs["framework"] == fw], "allreduce_library", NATIVE, HOROVOD)
        for fw in names
    ]
    tables = [t for t in tables if len(t)]
    table = decide(pd.concat(tables, ignore_index=True) if tables else pd.DataFrame())
    return with_block_model(table, runs, alpha)


ANALYSES = {"": "block model", "_paired": "paired", "_independent": "independent"}  # suffix: name


def one_analysis(table, name=""):
    """How many of `table`'s comparisons an analysis (a suffix of ANALYSES) resolves."""
    return int(table[f"verdict{name}"].isin(RESOLVED).sum()) if len(table) else 0


def _blocks_each(table):
    now = pd.to_numeric(table["blocks"], errors="coerce").where(table["verdict"].isin(RESOLVED))
    return pd.to_numeric(table["blocks_needed"], errors="coerce").fillna(now)


def resolved_with(table, blocks):
    """How many of `table`'s comparisons the block model would resolve with `blocks` complete blocks."""
    return int((_blocks_each(table) <= blocks).sum()) if len(table) else 0


def blocks_for(table, count):
    """The fewest complete blocks resolving `count` of the comparisons; None beyond MOST_BLOCKS."""
    need = _blocks_each(table).dropna().sort_values()
    within = need[need <= MOST_BLOCKS]
    return int(within.iloc[count - 1]) if 0 < count <= len(within) else None


# comparisons.csv's columns (columns.py describes each): the block model's, then each per-pair analysis's by suffix.
BLOCK_MODEL = ["ratio", "ratio_ci_lo", "ratio_ci_hi", "p_tukey", "p_equal_tukey", "verdict", "blocks_needed"]
PER_PAIR = ("ratio{}", "ratio{}_ci_lo", "ratio{}_ci_hi", "p{}", "p_holm{}", "p_equal_holm{}", "verdict{}")
COLUMNS = ["dimension", "a", "b", "a_library", "b_library"] + [k for k in CONFIG_KEYS if k != "allreduce_library"]
COLUMNS += ["ranks"] + [f"{side}_{c}" for side in "ab" for c in _SIDE] + ["blocks"] + BLOCK_MODEL
COLUMNS += [c.format("_paired") for c in PER_PAIR] + ["blocks_needed_paired"]
COLUMNS += [c.format("_independent") for c in PER_PAIR]
