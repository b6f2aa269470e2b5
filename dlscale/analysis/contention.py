"""contention.csv: each configuration's compute slowdown with k ranks on a node: the geometric mean of the
trials' paired ratios (k copies' mean iteration over the lone copy's: drift cancels), a t interval on logs."""

import json
import math
from pathlib import Path

import numpy as np
import pandas as pd

from dlscale.analysis import student
from dlscale.core.vocabulary import BASELINE_KEYS as MATCH

COLUMNS = MATCH + ["ranks_per_node", "trials", "alone_s", "together_s"]
COLUMNS += ["slowdown", "slowdown_ci_lo", "slowdown_ci_hi", "failure"]
# What the model multiplies a 1-rank run's phases by where no calibration measured it.
ASSUMED = 1.0


def geometric_ci(ratios, confidence=0.95):
    """(geometric mean, lower, upper) of positive ratios; the interval is NaN with fewer than two."""
    logs = np.log(np.asarray(ratios, float))
    mean = float(logs.mean())
    if len(logs) < 2:
        return math.exp(mean), math.nan, math.nan
    half = student.quantile(0.5 + confidence / 2, len(logs) - 1) * logs.std(ddof=1) / math.sqrt(len(logs))
    return math.exp(mean), math.exp(mean - half), math.exp(mean + half)


def row(identity, copies, lines):
    """contention.csv's row of one calibration: its identity (MATCH keys), ranks per node and trial lines."""
    good = [ln for ln in lines if "failure" not in ln]
    failures = [ln["failure"] for ln in lines if "failure" in ln]
    out = {**{k: identity[k] for k in MATCH}, "ranks_per_node": copies, "trials": len(good)}
    out["failure"] = failures[0] if failures else ("" if good else "no trial measured")
    if good:
        ratios = [ln["together_s"] / ln["alone_s"] for ln in good]
        out["slowdown"], out["slowdown_ci_lo"], out["slowdown_ci_hi"] = geometric_ci(ratios)
        for k in ("alone_s", "together_s"):
            out[k] = float(np.mean([ln[k] for ln in good]))
    return out


def table(calibrations):
    """contention.csv from [(identity, copies, path of its trial lines)]."""
    rows = []
    for identity, copies, path in calibrations:
        text = Path(path).read_text() if Path(path).exists() else ""
        rows.append(row(identity, copies, [json.loads(ln) for ln in text.splitlines() if ln.strip()]))
    return pd.DataFrame(rows).reindex(columns=COLUMNS)


def key(identity, ranks_per_node):
    """A calibration's key in `slowdowns`: a configuration's MATCH values and its ranks per node."""
    return (*(identity[k] for k in MATCH), int(ranks_per_node))


def slowdowns(contention):
    """{key: slowdown} of the calibrations that measured one."""
    good = contention.dropna(subset=["slowdown"])
    return {key(r, r["ranks_per_node"]): float(r["slowdown"]) for _, r in good.iterrows()}
