"""How many iterations a run measures (dlscale/core/samples.py): the median's distribution-free interval,
and the loop that stops at its target or at its bounds; a real 2-rank run whose ranks agree."""

import math

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy import stats

from dlscale.core import samples
from tests.test_fairness import run_once


def test_median_interval_on_known_data():
    x = [5, 1, 9, 3, 7, 2, 8, 4, 10, 6]  # n = 10: x(2) and x(9) (P(B <= 1) = 11/1024 <= 0.025 < P(B <= 2))
    assert samples.median_interval(x) == (5.5, 2.0, 9.0)
    assert math.isnan(samples.median_interval([1, 2, 3, 4, 5])[1])  # 5 values cannot bracket it at 95%
    assert samples.median_interval(range(1, 7))[1:] == (1.0, 6.0)  # 6: the extremes, 1 - 2/64 >= 0.95


def test_median_interval_on_skewed_data_is_not_the_mean_s():
    """A garbage collection's 200 ms in 30 iterations of 60 ms: the mean's t interval is dragged and
    widened by it, the median's is not."""
    rng = np.random.default_rng(0)
    times = list(0.06 + rng.normal(0, 0.0005, 29)) + [0.26]
    median, lo, hi = samples.median_interval(times)
    assert lo <= median <= hi and (hi - lo) / 2 / median < 0.02
    mean, half = np.mean(times), stats.t.ppf(0.975, 29) * np.std(times, ddof=1) / math.sqrt(30)
    assert half / mean > 0.05 and not lo <= mean <= hi


@settings(max_examples=200, deadline=None)
@given(st.integers(min_value=6, max_value=400))
def test_median_interval_takes_the_narrowest_order_statistics_with_95_percent(n):
    _, lo, hi = samples.median_interval(range(1, n + 1))
    j = int(lo)
    assert hi == n + 1 - j
    assert 1 - 2 * stats.binom.cdf(j - 1, n, 0.5) >= 0.95 - 1e-12  # covers at least 95%
    assert 1 - 2 * stats.binom.cdf(j, n, 0.5) < 0.95  # one rank narrower would not


def loop(enough, draw):
    """The loop's use of Enough: one iteration time from `draw` after another, until it says stop."""
    times = []
    while True:
        times.append(draw(len(times)))
        if enough.due(len(times)) and enough.stop(times):
            return times


def test_a_fixed_count_stops_there_without_asking_the_ranks():
    asked = []
    enough = samples.Enough(10, None, lambda met, bounded: asked.append(1) or (met, bounded))
    assert len(loop(enough, lambda i: 0.1)) == 10 and enough.stopped_by == "iterations" and not asked


def test_the_loop_stops_at_its_target():
    rng = np.random.default_rng(1)
    enough = samples.Enough(10, {"target": 0.02, "max_iterations": 1000, "max_seconds": 600})
    times = loop(enough, lambda i: 0.1 * (1 + rng.normal(0, 0.05)))  # CV 5%: about 40 iterations
    assert enough.stopped_by == "target"
    assert 20 <= len(times) <= 100 and (len(times) - 10) % samples.CHECK_EVERY == 0
    assert samples.relative_half_width(times) <= 0.02 < samples.relative_half_width(times[: -samples.CHECK_EVERY])


def test_the_loop_stops_at_its_bounds(monkeypatch):
    rng = np.random.default_rng(2)
    noisy = {"target": 0.001, "max_iterations": 37, "max_seconds": 600}
    enough = samples.Enough(10, noisy)
    assert len(loop(enough, lambda i: 0.1 * (1 + rng.normal(0, 0.2)))) == 37 and enough.stopped_by == "max_iterations"
    clock = [0.0]
    monkeypatch.setattr(samples.time, "perf_counter", lambda: clock[0])
    enough = samples.Enough(10, {**noisy, "max_iterations": 10**6, "max_seconds": 3.0})

    def draw(i):
        clock[0] += 0.1
        return 0.1 * (1 + rng.normal(0, 0.2))

    assert len(loop(enough, draw)) == 30 and enough.stopped_by == "max_seconds"  # 3 s at the 30th


def test_one_rank_short_of_its_target_keeps_every_rank_measuring():
    others_met = [False, False, True]  # what the other ranks say at each decision
    enough = samples.Enough(
        10, {"target": 0.5, "max_iterations": 100, "max_seconds": 600}, lambda met, b: (met and others_met.pop(0), b)
    )
    assert len(loop(enough, lambda i: 0.1)) == 30 and enough.stopped_by == "target"


def test_a_two_rank_run_measures_until_its_bound_on_both_ranks(tmp_path):
    """A target no CPU run meets: both ranks decide together (MPI) and stop at max_iterations."""
    from dlscale.core.records import parse_file

    status, run_dir = run_once(
        tmp_path, "torch", 2, iterations=4, samples={"target": 1e-6, "max_iterations": 14, "max_seconds": 600}
    )
    assert status["status"] == "ok", status
    for rank in (0, 1):
        records, _ = parse_file(run_dir / f"rank{rank}.jsonl")
        measured = [r for r in records if r["kind"] == "step" and not r["warmup"] and not r["profiled"]]
        end = next(r for r in records if r["kind"] == "end")
        assert len(measured) == 14 and end["samples_stopped_by"] == "max_iterations", end


def test_iterations_raised_above_max_iterations_are_the_bound_too():
    """`--config iterations=300` over config.yaml's samples (max_iterations 30): the run measures 300."""
    enough = samples.Enough(300, {"target": 0.02, "max_iterations": 30, "max_seconds": 600})
    times = loop(enough, lambda i: 0.1 * (1 + 0.2 * (-1) ** i))  # +-20%: never within 2%
    assert len(times) == 300 and enough.stopped_by == "max_iterations"
