"""The report's caveats (dlscale/analysis/caveats.py): every warning of a study in one place, on
hand-made tables whose answers are known."""

import pandas as pd

from dlscale.analysis import caveats
from dlscale.core.vocabulary import PHASES, seconds
from tests.conftest import tiny_run


def _config(ranks_per_node, **values):
    run = {**tiny_run(ranks_per_node=ranks_per_node), "image_size": 8, "classes": 2, "precision": "fp32"}
    run.pop("repeat")
    phases = {seconds(p): 0.1 for p in PHASES}
    quiet = {"iteration_s_ci_rel": 0.02, "iteration_s_cv": 0.01, "repeats_needed": 3, "efficiency": 0.9}
    return {**run, "ranks": ranks_per_node, **phases, **quiet, "cores_used": 1.0, "cores_given": 1.2, **values}


def test_a_clean_study_has_none():
    summary = pd.DataFrame([_config(1), _config(2)])
    runs = pd.DataFrame({"status": ["ok", "ok"]})
    text = caveats.lines(summary, runs, {"off_target": []}, pd.DataFrame())
    assert text[0] == "## Caveats" and "- none: every check passed" in text


def test_every_warning_is_collected_with_its_measured_cause():
    two = _config(2, efficiency=0.4, comm_s=0.9, backward_s=0.2, iteration_s_ci_rel=0.12, cores_used=1.5)
    summary = pd.DataFrame([_config(1), two])
    runs = pd.DataFrame({"status": ["ok", "failed", "ok"]})
    missed = {**two, "error_iteration": -0.2, "reason": "exposed communication: 0.9 s measured, 0.5 s predicted"}
    pairs = pd.DataFrame({"dimension": ["framework", "framework"], "verdict": ["unresolved", "a faster"]})
    text = "\n".join(caveats.lines(summary, runs, {"off_target": [missed]}, pairs))
    assert "- 1 of 3 runs failed" in text
    assert "- torch tinynet 1x2: its mean iteration time is known to ±12.0% (target ±5%" in text
    assert "- torch tinynet 1x2: efficiency 0.40 (below 0.5); comm grew most, +0.800 s per iteration" in text
    assert "a rank used 1.50 cores, more than the 1.20 it was given" in text
    assert "misses torch tinynet 1x2 by -20.0%: exposed communication: 0.9 s measured" in text
    assert "- 1 of 2 framework pairs unresolved" in text and "none: every check passed" not in text
