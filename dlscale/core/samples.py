"""How many iterations a run measures (until its median's interval meets the config's `samples` target, or a
bound) and where its steady state starts; the interval is distribution-free: a skewed run is not taken for normal."""

import itertools
import math
import time

import numpy as np

CONFIDENCE = 0.95
# what a run's end record (and runs.csv) says of its sampling
RECORDED = ("samples_target", "samples_stopped_by", "median_ci_rel")
CHECK_EVERY = 10  # measured iterations between two decisions (each costs the ranks one tiny allreduce)


def median_interval(times, confidence=CONFIDENCE):
    """(median, x(j), x(n+1-j)) of `times`, j the largest with P(Binomial(n, 1/2) < j) <= (1 - confidence) / 2
    (NaN bounds below 6 values at 95%)."""
    x = np.sort(np.asarray(times, dtype=float))
    n = len(x)
    if n == 0:
        return math.nan, math.nan, math.nan
    median = float(np.median(x))
    tail = (1 - confidence) / 2
    cdf = itertools.accumulate(math.comb(n, j) / 2**n for j in range(n // 2))  # P(B <= j)
    j = sum(1 for _ in itertools.takewhile(lambda p: p <= tail, cdf))
    if j == 0:
        return median, math.nan, math.nan
    return median, float(x[j - 1]), float(x[n - j])


def relative_half_width(times, confidence=CONFIDENCE):
    """Half the median's interval over the median (inf where it cannot be had yet)."""
    median, lo, hi = median_interval(times, confidence)
    return math.inf if math.isnan(lo) or median <= 0 else (hi - lo) / 2 / median


def steady_start(times, cap=0.5, k=3.0):
    """Leading iterations (at most cap x n) above the second half's median + k robust deviations: not yet
    steady (a stationary run keeps all but 1 time in 700 at k = 3)."""
    x = np.asarray(times, dtype=float)
    n = len(x)
    if n < 4:
        return 0
    tail = x[n // 2 :]
    level = np.median(tail) + k * 1.4826 * np.median(np.abs(tail - np.median(tail)))
    d = 0
    while d < int(cap * n) and x[d] > level:
        d += 1
    return d


def steady(times):
    """The iterations from the steady state on."""
    return list(times)[steady_start(times) :]


class Enough:
    """When a run has measured enough: `least` iterations, then (with a `target`) every CHECK_EVERY until
    its median's interval meets it on every rank (`agree`), or `most` or `seconds` is reached on any."""

    def __init__(self, least, samples=None, agree=None):
        samples = samples or {}
        self.least, self.target = least, samples.get("target")
        self.most = max(least, samples.get("max_iterations") or least)
        self.seconds = samples.get("max_seconds")
        self.agree = agree or (lambda met, bounded: (met, bounded))
        self.started = time.perf_counter()
        self.stopped_by = None

    def due(self, measured):
        """Whether to decide after `measured` iterations (0, in warm-up, restarts the clock of `seconds`)."""
        if measured <= 0:
            self.started = time.perf_counter()
        if measured < self.least:
            return False
        return self.target is None or measured == self.most or (measured - self.least) % CHECK_EVERY == 0

    def stop(self, times):
        """Decide, from this rank's measured iteration times; every rank calls it at the same count."""
        if self.target is None:
            self.stopped_by = "iterations"
            return True
        met = relative_half_width(steady(times)) <= self.target
        bounded = len(times) >= self.most or (
            self.seconds is not None and time.perf_counter() - self.started >= self.seconds
        )
        met, bounded = self.agree(met, bounded)
        if met or bounded:
            self.stopped_by = "target" if met else ("max_iterations" if len(times) >= self.most else "max_seconds")
        return met or bounded

    def record(self, times):
        """What the end record says of it."""
        rel = relative_half_width(steady(times))
        return dict(zip(RECORDED, (self.target, self.stopped_by, rel if math.isfinite(rel) else None)))
