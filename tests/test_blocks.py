"""The block model (dlscale/analysis/blocks.py) on known data: its fit against the textbook two-way
analysis, its simultaneous intervals and verdicts agreeing, and its error rates measured over many
simulated studies (a 10% difference under 2x drift found; identical frameworks called different in
no more than 5% of studies)."""

import math

import numpy as np
import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy import stats

from bench import block_error
from bench.block_error import FRAMEWORKS
from dlscale.analysis import blocks, comparisons, metrics, student


def test_the_fit_is_the_textbook_two_way_analysis_with_tukeys_intervals():
    rng = np.random.default_rng(7)
    runs = block_error.simulated(rng, {fw: 0.05 * i for i, fw in enumerate(FRAMEWORKS)})
    rows, table = blocks.pair_rows(runs)
    # Montgomery's RCBD by hand: y_ij - row mean - column mean + grand mean, (a-1)(b-1) df
    y = np.log(runs.pivot(index="framework", columns="repeat", values="throughput_img_per_s").to_numpy())
    resid = y - y.mean(1, keepdims=True) - y.mean(0, keepdims=True) + y.mean()
    mse = (resid**2).sum() / 6
    assert table.iloc[0]["residual_df"] == 6 and table.iloc[0]["residual_sd_log"] == pytest.approx(math.sqrt(mse))
    row = rows[(rows["a"] == ("jax", "native")) & (rows["b"] == ("torch", "horovod"))].iloc[0]
    diff = y[0].mean() - y[3].mean()
    half = stats.studentized_range.ppf(0.95, 4, 6) * math.sqrt(mse / 3)
    decided = blocks.decide(rows).loc[row.name]
    assert decided["ratio"] == pytest.approx(math.exp(diff))
    assert (decided["ratio_ci_lo"], decided["ratio_ci_hi"]) == pytest.approx(tuple(np.exp([diff - half, diff + half])))
    p = stats.studentized_range.sf(abs(diff) / math.sqrt(mse / 3), 4, 6)
    assert decided["p_tukey"] == pytest.approx(p, rel=1e-6)
    assert 0 <= table.iloc[0]["shapiro_p"] <= 1 and 0 <= table.iloc[0]["levene_p"] <= 1


def test_a_ten_percent_difference_under_twofold_drift_is_resolved_where_the_independent_analysis_is_not():
    rng = np.random.default_rng(3)
    runs = block_error.simulated(rng, {"mxnet": math.log(1.1), "torch": 0.0, "tensorflow": 0.0}, sd=0.02)
    table = comparisons.study(metrics.summarize(runs), runs)
    row = table[(table["a"] == "mxnet") & (table["b"] == "torch")].iloc[0]
    assert row["verdict"] == "a faster" and row["ratio_ci_lo"] > 1 and 1.03 < row["ratio"] < 1.17
    assert row["verdict_independent"] == "unresolved"


def test_identical_frameworks_measured_precisely_are_called_equal():
    rng = np.random.default_rng(5)
    runs = block_error.simulated(rng, {fw: 0.0 for fw in FRAMEWORKS}, blocks_n=6, sd=0.005)
    table = comparisons.study(metrics.summarize(runs), runs)
    assert (table["verdict"] == "equal").all() and len(table) == 6


def test_identical_frameworks_are_called_different_in_at_most_five_percent_of_simulated_studies():
    """The error rate over many studies of one configuration (4 identical frameworks, 3 blocks,
    drift up to 2x): Tukey's family is exact here, so about 5%, and not more beyond the sampling
    error of the simulation (one-sided 99%: 0.05 + 2.33 x its standard error)."""
    studies = 1500
    measured = block_error.rates("identical", studies, seed=11, sd=0.03, drift=2.0)
    rate = measured["block model"]
    assert measured["paired, unadjusted"] > 0.1  # the same studies, each pair tested alone: the error it avoids
    assert 0.02 < rate <= 0.05 + 2.33 * math.sqrt(0.05 * 0.95 / studies), rate


def test_pooling_follows_bartletts_test():
    rng = np.random.default_rng(2)
    same = {fw: 0.0 for fw in FRAMEWORKS}
    alike = pd.concat([block_error.simulated(rng, same, model=m, sd=0.03) for m in ("a", "b")])
    table, _ = blocks.models(alike)
    assert table["pooled"].all() and (table["df"] == 12).all() and table["bartlett_p"].iloc[0] >= 0.05
    unlike = pd.concat([block_error.simulated(rng, same, model=m, sd=sd) for m, sd in (("a", 0.002), ("b", 0.2))])
    table, _ = blocks.models(unlike)
    assert not table["pooled"].any() and (table["df"] == 6).all() and table["bartlett_p"].iloc[0] < 0.05


def test_a_missing_run_leaves_an_incomplete_block_fitted_not_dropped():
    rng = np.random.default_rng(4)
    runs = block_error.simulated(rng, {fw: 0.0 for fw in FRAMEWORKS}, blocks_n=4)
    runs = runs.drop(index=runs.index[(runs["framework"] == "torch") & (runs["repeat"] == 2)])
    rows, table = blocks.pair_rows(runs)
    assert table.iloc[0]["runs"] == 15 and table.iloc[0]["residual_df"] == 15 - 4 - 4 + 1
    torch = rows[rows["b"] == ("torch", "horovod")]
    assert (torch["se"] > rows[rows["b"] == ("tensorflow", "horovod")]["se"].max()).all()  # fewer runs, wider


def test_blocks_needed_falls_as_the_spread_narrows_and_resolves_where_it_says():
    wide, narrow = (blocks.blocks_needed(math.log(1.1), sd, 4) for sd in (0.2, 0.05))
    assert 2 <= narrow < wide <= blocks.MOST_BLOCKS
    n = narrow
    assert min(blocks.tukey(math.log(1.1), 0.05 * math.sqrt(2 / n), 4, 3 * (n - 1))) < 0.05
    assert min(blocks.tukey(math.log(1.1), 0.05 * math.sqrt(2 / (n - 1)), 4, 3 * (n - 2))) >= 0.05 or n == 2
    assert blocks.blocks_needed(math.log(1.05), 1.0, 4) == blocks.MOST_BLOCKS + 1
    assert math.isnan(blocks.blocks_needed(0.1, math.nan, 4))


@settings(max_examples=25, deadline=None)
@given(
    st.lists(st.floats(-0.3, 0.3), min_size=3, max_size=3),
    st.integers(2, 6),
    st.floats(0.001, 0.3),
    st.integers(0, 2**32 - 1),
)
def test_a_verdict_and_its_interval_never_disagree(effects, blocks_n, sd, seed):
    named = dict(zip(("mxnet", "tensorflow", "torch"), effects))
    runs = block_error.simulated(np.random.default_rng(seed), named, blocks_n, sd)
    rows, _ = blocks.pair_rows(runs)
    decided = blocks.decide(rows)
    clear = (decided["ratio_ci_lo"] > 1) | (decided["ratio_ci_hi"] < 1)
    faster = decided["verdict"].isin(("a faster", "b faster"))
    near = (np.log(decided["ratio_ci_lo"]).abs() < 1e-9) | (np.log(decided["ratio_ci_hi"]).abs() < 1e-9)
    assert ((clear == faster) | near).all()
    assert (decided["ratio_ci_lo"] > 0).all()


@settings(max_examples=300, deadline=None)
@given(
    p=st.one_of(st.floats(0.0, 1.0, exclude_min=True, exclude_max=True), st.just(math.nan)),
    x=st.floats(allow_nan=True, allow_infinity=True),
    df=st.one_of(st.floats(-2.0, 1e7), st.sampled_from([math.inf, math.nan]), st.integers(-1, 500)),
)
def test_students_t_is_scipy_stats_t_bit_for_bit(p, x, df):
    """The analysis's t quantile (of 0 < p < 1: its callers' two-sided levels) and tail
    (dlscale/analysis/student.py, from scipy.special) give exactly scipy.stats.t's numbers, NaN
    where it gives NaN."""

    def same(a, b):
        return (math.isnan(a) and math.isnan(b)) or a == b

    assert same(float(student.quantile(p, df)), float(stats.t.ppf(p, df)))
    assert same(float(student.sf(x, df)), float(stats.t.sf(x, df)))
