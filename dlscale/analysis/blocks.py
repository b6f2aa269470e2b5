"""A randomized complete block design per configuration (Montgomery, ch. 4): log rate = cell + block + error with
Tukey-Kramer intervals and tests, so an interval and its verdict never disagree. Why: docs/concepts/statistics.md."""

import functools
import itertools
import math

import numpy as np
import pandas as pd

from dlscale.analysis import student
from dlscale.analysis.verdicts import ALPHA, EQUAL, MOST_BLOCKS, RATE, verdict
from dlscale.core.vocabulary import CELL, CONFIG_KEYS

KEYS = [k for k in CONFIG_KEYS if k not in CELL] + ["ranks"]  # a configuration of the block model


def range_sf(q, cells, df):
    """P(studentized range of `cells` means > q) at `df`; two cells: t's p of q / sqrt(2) (scipy's is slow)."""
    if cells <= 2:
        return float(2 * student.sf(q / math.sqrt(2), df))
    from scipy import stats  # where it is needed (student.py)

    return float(stats.studentized_range.sf(q, cells, df))


def tukey(diff, se, cells, df, band=EQUAL):
    """(p of no difference, p of one outside `band`) of a pair's log difference, Tukey-Kramer over `cells`."""
    if not (np.isfinite(diff) and np.isfinite(se) and df >= 1):
        return math.nan, math.nan
    if se == 0:  # every block the same: the tests are exact
        return (0.0 if diff != 0 else 1.0), (0.0 if math.log(band[0]) < diff < math.log(band[1]) else 1.0)

    def one_sided(t):  # the family's one-sided p of a margin t standard errors wide
        half = range_sf(abs(t) * math.sqrt(2), cells, df) / 2
        return half if t > 0 else 1 - half

    p_equal = max(one_sided((diff - math.log(band[0])) / se), one_sided((math.log(band[1]) - diff) / se))
    return range_sf(abs(diff) / se * math.sqrt(2), cells, df), p_equal


@functools.cache
def critical(cells, df, confidence=1 - ALPHA):
    """A simultaneous interval's half-width in standard errors (cached: scipy's quantile takes 0.2 s)."""
    if not df >= 1:
        return math.nan
    if cells <= 2:
        return float(student.quantile(0.5 + confidence / 2, df))
    from scipy import stats  # where it is needed (student.py)

    return float(stats.studentized_range.ppf(confidence, cells, df)) / math.sqrt(2)


def fit(runs):
    """One configuration's runs: cells, blocks, log cell estimates, their unscaled covariance, residuals, df."""
    cells = sorted(set(zip(runs["framework"], runs["allreduce_library"])))
    blocks = sorted(runs["repeat"].unique())
    y = np.log(runs[RATE].to_numpy(dtype=float))
    x = np.zeros((len(y), len(cells) + len(blocks) - 1))
    x[np.arange(len(y)), [cells.index(c) for c in zip(runs["framework"], runs["allreduce_library"])]] = 1
    for j, block in enumerate(blocks[1:]):  # the first block is the reference: no intercept beside the cells
        x[(runs["repeat"] == block).to_numpy(), len(cells) + j] = 1
    unscaled = np.linalg.pinv(x.T @ x)
    beta = unscaled @ x.T @ y
    residuals = y - x @ beta
    k, df = len(cells), len(y) - np.linalg.matrix_rank(x)
    return cells, len(blocks), beta[:k], unscaled[:k, :k], residuals, df


def checks(runs, residuals):
    """(Shapiro-Wilk p of the residuals, Levene p of equal variance across cells); NaN where untestable."""
    from scipy import stats  # where it is needed (student.py)

    spread = np.ptp(residuals) > 1e-12 if len(residuals) else False
    shapiro = float(stats.shapiro(residuals).pvalue) if len(residuals) >= 3 and spread else math.nan
    cell_of = list(zip(runs["framework"], runs["allreduce_library"]))
    groups = [residuals[np.array([c == cell for c in cell_of])] for cell in sorted(set(cell_of))]
    testable = len(groups) >= 2 and all(len(g) >= 2 for g in groups) and spread
    levene = float(stats.levene(*groups, center="median").pvalue) if testable else math.nan
    return shapiro, levene


def bartlett(variances, dfs):
    """Bartlett's p of equal variances, each with its own degrees of freedom (NaN below two)."""
    from scipy import stats  # where it is needed (student.py)

    v, d = np.asarray(variances, dtype=float), np.asarray(dfs, dtype=float)
    keep = (d >= 1) & (v > 0)
    v, d = v[keep], d[keep]
    if len(v) < 2:
        return math.nan
    total = d.sum()
    pooled = (d * v).sum() / total
    m = total * math.log(pooled) - (d * np.log(v)).sum()
    c = 1 + ((1 / d).sum() - 1 / total) / (3 * (len(v) - 1))
    return float(stats.chi2.sf(m / c, len(v) - 1))


def models(runs, alpha=ALPHA):
    """blocks.csv: per configuration, the fit and its checks; the variance pooled where Bartlett's test
    does not reject at `alpha`, whatever level the comparisons test at."""
    rows, fits = [], []
    ok = runs[runs[RATE] > 0].assign(ranks=lambda r: r["nodes"] * r["ranks_per_node"])
    for key, group in ok.groupby(KEYS, observed=True, dropna=False):
        cells, blocks, est, unscaled, residuals, df = fit(group)
        sd = math.sqrt(float(residuals @ residuals / df)) if df >= 1 else math.nan
        fitted = (len(cells), blocks, len(group), df, sd, *checks(group, residuals))
        rows.append(dict(zip(KEYS, key)) | dict(zip(_FIT, fitted)))
        fits.append((cells, est, unscaled))
    if not rows:
        return pd.DataFrame(columns=BLOCK_COLUMNS), []
    table = pd.DataFrame(rows)
    variances = table["residual_sd_log"] ** 2
    p = bartlett(variances, table["residual_df"])
    pooled = bool(np.isfinite(p) and p >= alpha)
    known = table["residual_df"] >= 1
    pooled_df = int(table.loc[known, "residual_df"].sum())
    pooled_var = (variances[known] * table.loc[known, "residual_df"]).sum() / pooled_df if pooled_df else math.nan
    table["bartlett_p"], table["pooled"] = p, pooled
    table["df"] = pooled_df if pooled else table["residual_df"]
    table["sd_log"] = math.sqrt(pooled_var) if pooled else table["residual_sd_log"]
    return table.reindex(columns=BLOCK_COLUMNS), fits


def blocks_needed(diff, sd, cells, alpha=ALPHA, most=MOST_BLOCKS):
    """The fewest complete blocks (>= 2) resolving a pair (bisection); `most` + 1 out of reach, NaN without sd."""
    if not (np.isfinite(diff) and np.isfinite(sd) and sd > 0):
        return math.nan

    def resolves(n):
        return min(tukey(diff, sd * math.sqrt(2 / n), cells, (cells - 1) * (n - 1))) < alpha

    if not resolves(most):
        return most + 1
    lo, hi = 1, most  # resolves(hi), and 1 block never does
    while hi - lo > 1:
        mid = (lo + hi) // 2
        lo, hi = (lo, mid) if resolves(mid) else (mid, hi)
    return max(hi, 2)


def pair_rows(runs, alpha=ALPHA):
    """Every configuration's pairs of cells (a / b, name order): log difference, se, critical value; blocks.csv."""
    table, fits = models(runs)
    rows = []
    for model, (cells, est, unscaled) in zip(table.to_dict("records"), fits):
        crit = critical(len(cells), int(model["df"]), 1 - alpha) if model["df"] >= 1 else math.nan
        for i, j in itertools.combinations(range(len(cells)), 2):
            se = model["sd_log"] * math.sqrt(max(unscaled[i, i] + unscaled[j, j] - 2 * unscaled[i, j], 0))
            pair = {"a": cells[i], "b": cells[j], "diff": est[i] - est[j], "se": se, "crit": crit, "cells": len(cells)}
            rows.append({**{k: model[k] for k in KEYS}, **pair, "df": model["df"], "sd_log": model["sd_log"]})
    return pd.DataFrame(rows), table


def decide(pairs, alpha=ALPHA):
    """The block model's columns of comparisons.csv for `pair_rows`' rows."""
    diff, half = pairs["diff"], pairs["crit"] * pairs["se"]
    ratio = np.exp(diff)
    p = [tukey(d, se, c, df) for d, se, c, df in zip(diff, pairs["se"], pairs["cells"], pairs["df"])]
    out = pd.DataFrame({"ratio": ratio, "ratio_ci_lo": np.exp(diff - half), "ratio_ci_hi": np.exp(diff + half)})
    out["p_tukey"], out["p_equal_tukey"] = [x[0] for x in p], [x[1] for x in p]
    out["verdict"] = [verdict(r, d, e, alpha) for r, d, e in zip(ratio, out["p_tukey"], out["p_equal_tukey"])]
    out["blocks_needed"] = [
        math.nan if v != "unresolved" else blocks_needed(d, s, c, alpha)
        for v, d, s, c in zip(out["verdict"], pairs["diff"], pairs["sd_log"], pairs["cells"])
    ]
    return out


# blocks.csv's columns (dlscale/analysis/columns.py describes each).
_FIT = ["cells", "blocks", "runs", "residual_df", "residual_sd_log", "shapiro_p", "levene_p"]  # per configuration
BLOCK_COLUMNS = KEYS + _FIT + ["bartlett_p", "pooled", "df", "sd_log"]
