"""Comparisons on known data: the paired (blocked) and the independent analysis, Holm's adjustment,
the verdicts, the blocks a comparison needs, and intervals that stay positive."""

import math

import numpy as np
import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from dlscale.analysis import comparisons, metrics, report
from tests.conftest import ROOT


def test_holm_known_values():
    # R: p.adjust(c(0.01, 0.04, 0.03, 0.2), "holm") = 0.04 0.09 0.09 0.20
    assert comparisons.holm([0.01, 0.04, 0.03, 0.2]) == pytest.approx([0.04, 0.09, 0.09, 0.2])
    adjusted = comparisons.holm([0.01, math.nan, 0.02])
    assert adjusted[0] == pytest.approx(0.02) and math.isnan(adjusted[1]) and adjusted[2] == pytest.approx(0.02)


def test_log_interval_known_values_and_positive():
    # mean log 0, se 0.1, df 2: exp(+-4.303 x 0.1)
    ratio, lo, hi = comparisons.log_interval(0.0, 0.1, 2)
    assert ratio == 1 and lo == pytest.approx(math.exp(-0.43027), rel=1e-4) and hi == pytest.approx(1 / lo)
    # a spread that a linear interval would take below zero stays positive
    assert comparisons.log_interval(0.0, 2.0, 2)[1] > 0


def test_verdicts():
    assert comparisons.verdict(1.2, 0.01, 0.9) == "a faster"
    assert comparisons.verdict(0.8, 0.01, 0.9) == "b faster"
    assert comparisons.verdict(1.01, 0.5, 0.01) == "equal"
    assert comparisons.verdict(1.03, 0.2, 0.2) == "unresolved"


def test_tost_band():
    p_diff, p_equal = comparisons.tests(math.log(1.0), 0.005, 5)
    assert p_diff == pytest.approx(1.0) and p_equal < 0.001
    p_diff, p_equal = comparisons.tests(math.log(1.2), 0.005, 5)
    assert p_diff < 0.001 and p_equal > 0.99


def test_blocks_needed_grows_with_spread():
    few = comparisons.blocks_needed(math.log(1.10), 0.05, 0.05 / 2)
    many = comparisons.blocks_needed(math.log(1.10), 0.20, 0.05 / 2)
    assert 2 <= few < many <= comparisons.MOST_BLOCKS
    # a 5% difference under a spread of 100%: out of reach
    assert comparisons.blocks_needed(math.log(1.05), 1.0, 0.025) == comparisons.MOST_BLOCKS + 1
    assert math.isnan(comparisons.blocks_needed(0.1, math.nan, 0.025))


def _runs(times):
    """A run table: {framework: [iteration_s per block]} for one configuration, batch 8, 1 rank."""
    rows = []
    for fw, per_block in times.items():
        for k, t in enumerate(per_block):
            rows.append(
                dict(
                    framework=fw,
                    model="m",
                    allreduce_schedule="overlap",
                    allreduce_library="native" if fw == "jax" else "horovod",
                    layout="best",
                    timing="native",
                    nodes=1,
                    ranks_per_node=1,
                    batch_size=8,
                    loader_workers=1,
                    image_size=64,
                    classes=10,
                    threads_per_rank=1,
                    precision="fp32",
                    repeat=k,
                    ranks=1,
                    iteration_s=t,
                    iteration_s_median=t,
                    iteration_s_p95=t,
                    outlier_iterations=0,
                    iterations=10,
                    unsteady_iterations=0,
                    throughput_img_per_s=8 / t,
                )
            )
    return pd.DataFrame(rows).reindex(columns=metrics.RUN_METRICS_COLUMNS)


def test_drift_resolved_by_blocks_not_by_independent_analysis():
    # the machine slows 2x from block to block; b is 10% slower than a in every block
    drift = [1.0, 1.6, 2.2, 1.3]
    runs = _runs({"mxnet": [0.1 * d for d in drift], "torch": [0.11 * d for d in drift]})
    table = comparisons.study(metrics.summarize(runs), runs)
    row = table.iloc[0]
    assert (row["a"], row["b"], row["blocks"]) == ("mxnet", "torch", 4)
    assert row["ratio"] == pytest.approx(1.1) and row["verdict"] == "a faster"
    assert row["ratio_ci_lo"] == pytest.approx(1.1) and row["ratio_ci_hi"] == pytest.approx(1.1)
    assert row["ratio_independent"] == pytest.approx(1.1) and row["verdict_independent"] == "unresolved"
    assert row["ratio_paired"] == pytest.approx(1.1) and row["verdict_paired"] == "a faster"
    assert math.isnan(row["blocks_needed"]) and math.isnan(row["blocks_needed_paired"])


def test_every_framework_compared_at_its_default_library():
    runs = _runs({"torch": [0.10, 0.11, 0.10], "jax": [0.10, 0.101, 0.099]})
    table = comparisons.study(metrics.summarize(runs), runs)
    assert len(table) == 1
    row = table.iloc[0]
    assert (row["a"], row["a_library"], row["b"], row["b_library"]) == ("jax", "native", "torch", "horovod")


def test_unresolved_pair_says_blocks_needed():
    runs = _runs({"mxnet": [0.10, 0.13, 0.09], "torch": [0.11, 0.10, 0.12]})
    row = comparisons.study(metrics.summarize(runs), runs).iloc[0]
    assert row["verdict"] == "unresolved" and row["blocks_needed"] > 3
    assert row["verdict_paired"] == "unresolved" and row["blocks_needed_paired"] > 3


def test_what_more_blocks_would_resolve_counts_the_resolved_and_those_needing_at_most_that_many():
    """The report's "with more blocks" line and study-time.csv's blocks_for_20_of_24: pairs resolved now
    count at their blocks, unresolved ones at their blocks_needed, and out of reach (> 200) never."""
    table = pd.DataFrame(
        {
            "verdict": ["a faster", "equal", "unresolved", "unresolved", "unresolved", "unresolved"],
            "blocks": [3, 3, 3, 3, 3, 3],
            "blocks_needed": [math.nan, math.nan, 5, 9, 40, comparisons.MOST_BLOCKS + 1],
        }
    )
    assert [comparisons.resolved_with(table, n) for n in (2, 3, 6, 9, 30, 200)] == [0, 2, 3, 4, 4, 5]
    assert [comparisons.blocks_for(table, k) for k in (1, 2, 3, 4, 5, 6)] == [3, 3, 5, 9, 40, None]
    line = report._more_blocks(table)
    assert "6 blocks 3, 9 blocks 4, 15 blocks 4, 30 blocks 4 of 6" in line


def test_an_interval_bound_near_1_shows_the_digits_that_tell_it_from_1():
    """A verdict of `a faster` beside "[1, 1.47]" reads as a contradiction; the bound 1.0043 is shown
    as 1.004, while a bound that is 1 stays 1 and others keep 3 digits."""
    row = {"ratio": 1.21, "ratio_ci_lo": 1.0042915, "ratio_ci_hi": 1.4679}
    assert report._with_ci(row, "ratio") == "1.21 [1.004, 1.47]"
    assert report._with_ci({**row, "ratio_ci_lo": 0.99961}, "ratio") == "1.21 [0.9996, 1.47]"
    assert report._with_ci({**row, "ratio_ci_lo": 1.0}, "ratio") == "1.21 [1, 1.47]"
    assert report._with_ci({**row, "ratio_ci_lo": 0.85}, "ratio") == "1.21 [0.85, 1.47]"


def test_the_reports_table_prints_an_interval_only_beside_the_verdict_of_its_own_family():
    """The example's comparisons: the block model's simultaneous interval beside its verdict; the paired
    and independent analyses' Holm-adjusted p-values beside theirs, not their unadjusted intervals."""
    table = pd.read_csv(ROOT / "docs" / "example" / "comparisons.csv")
    head, cells = report._comparison_rows(table, "framework")
    shown = {name: [row[head.index(name)] for row in cells] for name in head}
    assert all("[" in c for c in shown["ratio [simultaneous 95% CI]"])
    for analysis in ("paired", "independent"):
        column = shown[f"{analysis} ratio (Holm p: differ, equal)"]
        assert len(column) == 24 and not any("[" in c for c in column) and all(" (p " in c for c in column)
    assert report._with_holm(
        {"ratio_paired": 1.21, "p_holm_paired": 0.1634, "p_equal_holm_paired": 1.0}, "_paired"
    ) == ("1.21 (p 0.16, 1)")


def test_holm_over_the_family_is_stricter_than_one_test():
    # 20 comparisons with the same modest evidence: each alone would reject, the family does not
    table = pd.DataFrame(
        {
            "mean_log": [0.05] * 20,
            "sd_log": [0.02] * 20,
            "blocks": [3] * 20,
            "mean_log_independent": [0.05] * 20,
            "se_log_independent": [0.02] * 20,
            "df_independent": [2] * 20,
        }
    )
    decided = comparisons.decide(table)
    assert (decided["p_paired"] < 0.05).all() and (decided["p_holm_paired"] > 0.05).all()
    assert (decided["verdict_paired"] == "unresolved").all()


@settings(max_examples=60, deadline=None)
@given(st.lists(st.floats(0.01, 10.0), min_size=2, max_size=8), st.floats(0.3, 3.0))
def test_intervals_always_positive(times, factor):
    runs = _runs({"mxnet": times, "torch": [t * factor for t in times[::-1]]})
    summary = metrics.summarize(runs)
    for col in ("iteration_s_ci_lo", "throughput_img_per_s_ci_lo"):
        assert not (summary[col] <= 0).any()
    assert not np.isinf(summary[["throughput_img_per_s_ci_lo", "throughput_img_per_s_ci_hi"]].to_numpy()).any()
    table = comparisons.study(summary, runs)
    for col in ("ratio_ci_lo", "ratio_paired_ci_lo", "ratio_independent_ci_lo"):
        assert not (table[col] <= 0).any()


def test_old_delta_interval_went_negative_new_one_does_not():
    # speedup 0.689 with wide spreads (the report): a/b +- t se(a/b) fell below 0
    ratio, lo, hi = metrics.ratio_ci(metrics.Mean(10.0, 4.0, 3), metrics.Mean(14.5, 5.0, 3))
    old_lo = ratio - 4.303 * ratio * math.sqrt((4 / 10) ** 2 + (5 / 14.5) ** 2)
    assert old_lo < 0 < lo < ratio < hi and math.isfinite(hi)


def test_rate_interval_never_infinite():
    # a 3-repeat cost with CV 41% (the JAX AlexNet): the plain t interval reached below 0
    mean, lo, hi, method = metrics.interval([0.37, 0.79, 0.46])
    assert lo > 0 and "log scale" in method
    rate = metrics.harmonic_rate(8, mean, lo, hi)
    assert all(math.isfinite(v) and v > 0 for v in rate)
    assert math.isnan(metrics.harmonic_rate(8, 0.2, -0.1, 0.4)[2])  # unresolved, not infinite
