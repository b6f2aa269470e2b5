"""The report's "Caveats": failed runs, noisy or inefficient configurations, extra cores, model misses, open pairs."""

import pandas as pd

from dlscale.analysis.metrics import PRECISION
from dlscale.core.vocabulary import BASELINE_KEYS, PHASES, seconds

LOW_EFFICIENCY = 0.5


def _name(row):
    return f"{row['framework']} {row['model']} {row['nodes']}x{row['ranks_per_node']}"


def _failed(runs):
    bad = runs[runs["status"] != "ok"] if len(runs) else runs
    return [f"{len(bad)} of {len(runs)} runs failed (runs.csv `reasons`)"] if len(bad) else []


def _noisy(summary):
    wide = summary[summary["iteration_s_ci_rel"] > PRECISION]
    return [
        f"{_name(r)}: its mean iteration time is known to ±{r['iteration_s_ci_rel']:.1%} (target ±{PRECISION:.0%}; "
        f"run-to-run CV {r['iteration_s_cv']:.1%}, {r['repeats_needed']:.0f} repeats would reach it)"
        for r in wide.to_dict("records")
    ]


def _cause(row):
    """The phase whose time per iteration grew most from the 1-rank run (its `_base` columns) to this one."""
    growth = {p: row[seconds(p)] - row[f"{seconds(p)}_base"] for p in PHASES}
    growth = {p: g for p, g in growth.items() if pd.notna(g)}
    if not growth:
        return "no phase times of it and its 1-rank run to say why"
    phase = max(growth, key=growth.get)
    return f"{phase} grew most, +{growth[phase]:.3f} s per iteration against 1 rank"


def _inefficient(summary):
    phases = [seconds(p) for p in PHASES]
    ones = summary.loc[summary["ranks"] == 1, BASELINE_KEYS + phases]  # the baseline, as add_scaling's
    low = summary[(summary["ranks"] > 1) & (summary["efficiency"] < LOW_EFFICIENCY)]
    low = low.merge(ones, on=BASELINE_KEYS, how="left", suffixes=("", "_base"))
    return [
        f"{_name(r)}: efficiency {r['efficiency']:.2f} (below {LOW_EFFICIENCY}); {_cause(r)}"
        for r in low.to_dict("records")
    ]


def _cores(summary):
    if "cores_used" not in summary:
        return []
    over = summary[summary["cores_used"] > summary["cores_given"]]
    return [
        f"{_name(r)}: a rank used {r['cores_used']:.2f} cores, more than the {r['cores_given']:.2f} it was given"
        for r in over.to_dict("records")
    ]


def _model(model_error):
    return [
        f"the performance model misses {_name(r)} by {r['error_iteration']:+.1%}: {r.get('reason', 'reason not given')}"
        for r in (model_error or {}).get("off_target", [])
    ]


def _unresolved(pairs):
    frameworks = pairs[pairs["dimension"] == "framework"] if len(pairs) else pairs
    open_ = int((frameworks["verdict"] == "unresolved").sum()) if len(frameworks) else 0
    said = f"{open_} of {len(frameworks)} framework pairs unresolved (Framework comparisons: blocks needed)"
    return [said] if open_ else []


def lines(summary, runs, model_error, pairs):
    """The report's "Caveats" section: every warning of the study, one line each."""
    found = _failed(runs) + _noisy(summary) + _inefficient(summary) + _cores(summary)
    found += _model(model_error) + _unresolved(pairs)
    intro = "What a reader must know before using the numbers below, collected from the sections that measure it."
    return ["## Caveats", "", intro, "", *(f"- {line}" for line in found or ["none: every check passed"]), ""]
