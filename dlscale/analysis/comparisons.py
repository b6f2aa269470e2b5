"""Comparisons of two levels of a dimension (two frameworks, two libraries), configuration by
configuration, made three ways from the same runs.

- the block model (the study's verdict; blocks.py): every run of a configuration in one model of
  log throughput on cell (framework, library) and block, pairs compared with Tukey's simultaneous
  intervals and tests, one family per configuration. Columns without a suffix.
- paired (`_paired`, beside it): a block is one repeat index; under `design: {order: blocked}`
  every configuration runs once per block, so a shared machine's slow drift falls on both sides of
  a pair alike. Each block gives one within-block ratio of the two runs' throughputs; the estimate
  is their geometric mean, its 95% interval Student-t on the log scale (always positive).
- independent (`_independent`, beside it, on the same runs): the ratio of the two sides'
  throughputs (summary.csv's harmonic means) with a delta-method interval on the log scale,
  se(log a/b)^2 = (se_a/a)^2 + (se_b/b)^2, min(n_a, n_b) - 1 degrees of freedom.

Each per-pair comparison tests two hypotheses: the ratio is 1 (two-sided t), and the ratio lies
outside the equivalence band EQUAL (two one-sided tests). Holm's step-down procedure adjusts the
p-values of all of a study's hypotheses of one analysis together (2 per comparison), so its verdicts
hold at a family-wise error of ALPHA (its intervals are each at 95%, not adjusted: only the block
model's intervals are simultaneous with its verdicts). A comparison is resolved when one of its two
hypotheses is rejected: `a faster` / `b faster`, or `equal` (within the band); else `unresolved`,
with the blocks it needs at its measured spread (`blocks_needed`: the block model's;
`blocks_needed_paired`: at the Bonferroni level ALPHA / hypotheses, the strictest step of Holm's)."""

import math

import numpy as np
import pandas as pd

from dlscale.analysis import blocks, student
from dlscale.analysis.verdicts import ALPHA, CONFIDENCE, EQUAL, MOST_BLOCKS, RATE, RESOLVED, verdict
from dlscale.core.vocabulary import CONFIG_KEYS
from dlscale.workloads.frameworks import HOROVOD, NATIVE, default_library


def log_interval(mean_log, se_log, df, confidence=CONFIDENCE):
    """(ratio, lower, upper) of a ratio from its log's mean and standard error: exp(m +- t se);
    positive whenever it exists (NaN bounds without a standard error or degrees of freedom)."""
    ratio = math.exp(mean_log) if np.isfinite(mean_log) else math.nan
    if not (np.isfinite(se_log) and df >= 1):
        return ratio, math.nan, math.nan
    half = student.quantile(0.5 + confidence / 2, df) * se_log
    return ratio, math.exp(mean_log - half), math.exp(mean_log + half)


def tests(mean_log, se_log, df, band=EQUAL):
    """(p of ratio = 1, p of ratio outside `band`): a two-sided t test and the larger of the two
    one-sided tests against the band's ends (TOST). NaN without a standard error."""
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
    m, running = len(order), 0.0
    for i, k in enumerate(order):
        running = max(running, min(1.0, (m - i) * p[k]))
        out[k] = running
    return out


def blocks_needed(mean_log, sd_log, level, band=EQUAL, most=MOST_BLOCKS):
    """The fewest blocks (>= 2) at which a paired comparison with this mean and spread of its
    blocks' log ratios is resolved at `level`; `most` + 1 where that is out of reach (a mean on the
    band's edge); NaN without a spread."""
    if not (np.isfinite(mean_log) and np.isfinite(sd_log)):
        return math.nan
    for n in range(2, most + 1):
        p_diff, p_equal = tests(mean_log, sd_log / math.sqrt(n), n - 1, band)
        if min(p_diff, p_equal) < level:
            return n
    return most + 1


def paired(a_runs, b_runs, keys):
    """Per configuration (`keys`) both sides ran: the blocks (repeats) both ran, and the mean and
    standard deviation of the blocks' log throughput ratios a / b."""
    both = a_runs[keys + ["repeat", RATE]].merge(b_runs[keys + ["repeat", RATE]], on=keys + ["repeat"])
    both = both[(both[f"{RATE}_x"] > 0) & (both[f"{RATE}_y"] > 0)]
    both["log_ratio"] = np.log(both[f"{RATE}_x"] / both[f"{RATE}_y"])
    return (
        both.groupby(keys, observed=True, dropna=False)["log_ratio"]
        .agg(blocks="count", mean_log="mean", sd_log="std")
        .reset_index()
    )


def independent(a_summary, b_summary, keys):
    """Per configuration both sides ran: each side's throughput (harmonic mean), interval, standard
    error and repeats, and the log ratio's mean, standard error and degrees of freedom."""
    cols = [RATE, f"{RATE}_ci_lo", f"{RATE}_ci_hi", "throughput_se", "repeats_ok"]
    names = ["img_per_s", "img_per_s_ci_lo", "img_per_s_ci_hi", "img_per_s_se", "repeats"]
    sides = [
        s[keys + cols].rename(columns={c: f"{side}_{n}" for c, n in zip(cols, names)})
        for s, side in ((a_summary, "a"), (b_summary, "b"))
    ]
    both = sides[0].merge(sides[1], on=keys)
    both["mean_log_independent"] = np.log(both["a_img_per_s"] / both["b_img_per_s"])
    both["se_log_independent"] = np.sqrt(
        (both["a_img_per_s_se"] / both["a_img_per_s"]) ** 2 + (both["b_img_per_s_se"] / both["b_img_per_s"]) ** 2
    )
    both["df_independent"] = np.minimum(both["a_repeats"], both["b_repeats"]) - 1
    return both


def _sides(summary, runs, dimension, a, b, where):
    """The rows of level `a` and level `b` of `dimension`, each side filtered by `where(level)`
    (a dict of column: value), in the summary (ok configurations) and the run table."""
    ok = summary[summary["repeats_ok"] > 0]

    def pick(table, level):
        mask = table[dimension] == level
        for col, value in where(level).items():
            mask &= table[col] == value
        return table[mask]

    return pick(ok, a), pick(ok, b), pick(runs, a), pick(runs, b)


def pairs(summary, runs, dimension, a, b, where=lambda level: {}):
    """Every configuration run with level `a` and level `b` of `dimension`: both analyses' rows
    (unadjusted; `decide` adjusts and decides over the whole family). Columns named by
    COLUMNS; `a_library`/`b_library` say each side's communication library."""
    drop = {dimension} | ({"allreduce_library"} if dimension == "framework" else set())
    keys = [k for k in CONFIG_KEYS if k not in drop] + ["ranks"]
    sa, sb, ra, rb = _sides(summary, runs, dimension, a, b, where)
    table = independent(sa, sb, keys)
    libs = sa[keys + ["allreduce_library"]].merge(sb[keys + ["allreduce_library"]], on=keys, suffixes=("_a", "_b"))
    table = table.merge(
        libs.rename(columns={"allreduce_library_a": "a_library", "allreduce_library_b": "b_library"}), on=keys
    )
    blocks = paired(*(r.assign(ranks=r["nodes"] * r["ranks_per_node"]) for r in (ra, rb)), keys)
    table = table.merge(blocks, on=keys, how="left")
    table["blocks"] = table["blocks"].fillna(0).astype(int)
    return table.assign(dimension=dimension, a=a, b=b)


def decide(table, alpha=ALPHA):
    """The paired and the independent analyses' intervals, Holm-adjusted p-values and verdicts, and
    the blocks an unresolved paired comparison needs, for every row of `table` (the study's whole
    family of comparisons); the block model's columns stay empty (`study` fills them)."""
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


def _cells(table):
    """Each comparison's two cells (framework, library) as the block model names them."""
    by_framework = table["dimension"] == "framework"
    a = np.where(by_framework, table["a"], table["framework"]), np.where(by_framework, table["a_library"], table["a"])
    b = np.where(by_framework, table["b"], table["framework"]), np.where(by_framework, table["b_library"], table["b"])
    return list(zip(*a)), list(zip(*b))


def with_block_model(table, runs, alpha=ALPHA):
    """`decide`'s table with the block model's columns (blocks.py) for each comparison: its cells'
    pair in its configuration, the ratio a / b, simultaneous interval, adjusted tests and verdict."""
    rows, _ = blocks.pair_rows(runs, alpha)
    if table.empty or rows.empty:
        return table
    decided = pd.concat([rows[blocks.KEYS + ["a", "b"]], blocks.decide(rows, alpha)], axis=1)
    flipped = decided.rename(columns={"a": "b", "b": "a"}).assign(
        ratio=1 / decided["ratio"],
        ratio_ci_lo=1 / decided["ratio_ci_hi"],
        ratio_ci_hi=1 / decided["ratio_ci_lo"],
        verdict=decided["verdict"].replace({"a faster": "b faster", "b faster": "a faster"}),
    )
    both = pd.concat([decided, flipped], ignore_index=True).rename(columns={"a": "cell_a", "b": "cell_b"})
    cell_a, cell_b = _cells(table)
    keyed = table.drop(columns=BLOCK_MODEL).assign(cell_a=cell_a, cell_b=cell_b)
    merged = keyed.merge(both, on=blocks.KEYS + ["cell_a", "cell_b"], how="left", validate="one_to_one")
    return merged.reindex(columns=COLUMNS)


def study(summary, runs, alpha=ALPHA):
    """comparisons.csv: every pair of the study's frameworks (name order, a / b), each at its default
    library, in every configuration both ran; and each framework run through both libraries, native
    / horovod; the per-pair analyses decided together as one family (`decide`), the block model per
    configuration at `alpha` (sequential.alpha: split over the looks of a sequential design)."""
    ok = summary[summary["repeats_ok"] > 0]
    names = sorted(ok["framework"].unique())
    tables = [
        pairs(ok, runs, "framework", a, b, lambda fw: {"allreduce_library": default_library(fw)})
        for i, a in enumerate(names)
        for b in names[i + 1 :]
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
    """How many of `table`'s comparisons an analysis resolves: '' the block model's, '_paired',
    '_independent'."""
    return int(table[f"verdict{name}"].isin(RESOLVED).sum()) if len(table) else 0


def _blocks_each(table):
    """The complete blocks at which the block model resolves each of `table`'s comparisons at its
    measured ratio and spread: a resolved one's blocks, an unresolved one's `blocks_needed` (NaN
    without a spread; above MOST_BLOCKS out of reach)."""
    now = pd.to_numeric(table["blocks"], errors="coerce").where(table["verdict"].isin(RESOLVED))
    return pd.to_numeric(table["blocks_needed"], errors="coerce").fillna(now)


def resolved_with(table, blocks):
    """How many of `table`'s comparisons the block model would resolve with `blocks` complete blocks
    at their measured ratios and spreads."""
    return int((_blocks_each(table) <= blocks).sum()) if len(table) else 0


def blocks_for(table, count):
    """The fewest complete blocks at which the block model would resolve `count` of `table`'s
    comparisons at their measured spreads (what a slower or noisier machine would need); None where
    that is beyond MOST_BLOCKS."""
    need = _blocks_each(table).dropna().sort_values()
    within = need[need <= MOST_BLOCKS]
    return int(within.iloc[count - 1]) if 0 < count <= len(within) else None


# The block model's columns (blocks.py), then each per-pair analysis's, named by its suffix.
BLOCK_MODEL = ["ratio", "ratio_ci_lo", "ratio_ci_hi", "p_tukey", "p_equal_tukey", "verdict", "blocks_needed"]
PER_PAIR = [
    c.format(name)
    for name in ("_paired", "_independent")
    for c in ("ratio{}", "ratio{}_ci_lo", "ratio{}_ci_hi", "p{}", "p_holm{}", "p_equal_holm{}", "verdict{}")
]
# comparisons.csv's columns (dlscale/analysis/columns.py describes each).
COLUMNS = (
    ["dimension", "a", "b", "a_library", "b_library"]
    + [k for k in CONFIG_KEYS if k != "allreduce_library"]
    + ["ranks"]
    + [f"{s}_{c}" for s in "ab" for c in ("img_per_s", "img_per_s_ci_lo", "img_per_s_ci_hi", "img_per_s_se", "repeats")]
    + ["blocks"]
    + BLOCK_MODEL
    + PER_PAIR[:7]
    + ["blocks_needed_paired"]
    + PER_PAIR[7:]
)
