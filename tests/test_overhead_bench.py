"""bench/overhead.py's verdict on the 0.99 target, with known trials: the interval of the median of
the paired ratios decides, and too few trials decide nothing."""

import sys
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "bench"))
import overhead  # noqa: E402


def test_trials_all_above_the_target_meet_it():
    median, lo, hi, said = overhead.verdict([0.995, 1.0, 1.01, 1.02, 0.999, 1.03])
    assert said == "met" and lo == 0.995 and hi == 1.03 and median == pytest.approx(1.005)


def test_trials_all_below_it_miss_it():
    assert overhead.verdict([0.95, 0.96, 0.97, 0.94, 0.985, 0.96])[3] == "missed"


def test_a_spread_holding_the_target_is_undecided_whatever_its_median():
    # the median is 0.96, below 0.99, but the interval (its 2nd and 8th of 9) reaches 1.1
    ratios = [0.85, 0.9, 0.93, 0.95, 0.96, 0.97, 1.05, 1.1, 1.2]
    median, lo, hi, said = overhead.verdict(ratios)
    assert (median, lo, hi, said) == (0.96, 0.9, 1.1, "undecided")


def test_three_trials_have_no_interval():
    median, lo, hi, said = overhead.verdict([1.0, 1.01, 1.02])
    assert median == 1.01 and lo != lo and hi != hi and said.startswith("too few trials (3)")


@given(st.lists(st.floats(0.5, 1.5), min_size=6, max_size=40))
def test_the_interval_holds_the_median_and_the_verdict_follows_it(ratios):
    median, lo, hi, said = overhead.verdict(ratios)
    assert min(ratios) <= lo <= median <= hi <= max(ratios)
    assert said == ("met" if lo >= 0.99 else "missed" if hi < 0.99 else "undecided")
