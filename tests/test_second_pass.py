"""The study's second pass (dlscale/analysis/second_pass.py): repeats chosen by the first pass's data, bounded
by repeats and by seconds; and a real Snakemake study that runs the repeats it plans."""

import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest
import yaml

from dlscale.analysis import cost, second_pass
from dlscale.core import paths
from dlscale.core.vocabulary import CONFIG_KEYS
from dlscale.runtime import config as cfg
from tests.conftest import ROOT, SNAKEMAKE, tiny_config, tiny_run


def _first_pass(times_by_model, run_s=10.0):
    """runs.csv and run_metrics.csv of a first pass: one configuration per model, one run per time."""
    runs, metrics = [], []
    for model, times in times_by_model.items():
        for repeat, t in enumerate(times):
            run = {**tiny_run(model=model, repeat=repeat), "image_size": 64, "classes": 10}
            run |= {"threads_per_rank": 1, "precision": "fp32"}
            runs.append({**run, "status": "ok" if t else "failed", "elapsed_s": run_s})
            if t:
                metrics.append({**run, "iteration_s": t})
    return pd.DataFrame(metrics), pd.DataFrame(runs)


def _plan(times_by_model, target=0.05, max_repeats=6, max_seconds=1000.0, run_s=10.0):
    plan = second_pass.plan(*_first_pass(times_by_model, run_s), 3, target, max_repeats, max_seconds)
    return {r["model"]: r for r in plan.to_dict("records")}


def test_a_precise_configuration_gets_no_more_repeats():
    row = _plan({"tinynet": [1.00, 1.01, 0.99]})["tinynet"]
    assert (row["second_pass"], row["repeats_planned"]) == (second_pass.MET, 3)
    assert row["iteration_s_ci_rel_first"] == pytest.approx(0.0248, abs=1e-3)  # t(2) 0.01 / sqrt(3)


def test_a_wide_configuration_gets_the_repeats_its_spread_needs():
    # CV 4%: t(0.975, n-1) 0.04 / sqrt(n) <= 0.05 first at n = 5
    row = _plan({"tinynet": [0.96, 1.00, 1.04]})["tinynet"]
    assert (row["second_pass"], row["repeats_needed"], row["repeats_planned"]) == (second_pass.ADDED, 5, 5)


def test_repeats_stop_at_max_repeats():
    row = _plan({"tinynet": [0.8, 1.0, 1.2]}, max_repeats=4)["tinynet"]
    assert row["repeats_needed"] > 4
    assert (row["second_pass"], row["repeats_planned"]) == (second_pass.BY_REPEATS, 4)


def test_max_seconds_goes_first_to_configurations_it_makes_precise():
    # alexnet needs 5 repeats (2 more, 20 s), resnet50 more than max_repeats: 25 s of budget gives
    # alexnet its two and resnet50 none
    rows = _plan({"alexnet": [0.96, 1.00, 1.04], "resnet50": [0.7, 1.0, 1.3]}, max_seconds=25)
    assert (rows["alexnet"]["second_pass"], rows["alexnet"]["repeats_planned"]) == (second_pass.ADDED, 5)
    assert (rows["resnet50"]["second_pass"], rows["resnet50"]["repeats_planned"]) == (second_pass.BY_SECONDS, 3)


def test_a_configuration_with_fewer_than_two_ok_runs_is_left_as_it_is():
    row = _plan({"tinynet": [1.0, None, None]})["tinynet"]
    assert (row["second_pass"], row["repeats_planned"]) == (second_pass.TOO_FEW, 3)


def test_added_runs_continue_each_configurations_repeats():
    conf = tiny_config(Path("/tmp"), framework=["torch"], ranks_per_node=[1, 2], repeats=2)
    matrix = cfg.matrix(conf)
    plan = pd.DataFrame([{**matrix[0], "repeats_planned": 4}])  # the 1-rank configuration
    added = second_pass.added_runs(matrix, plan)
    assert [(r["ranks_per_node"], r["repeat"]) for r in added] == [(1, 2), (1, 3)]


def _study(tmp_path, **second):
    conf = tiny_config(tmp_path, framework=["torch"], ranks_per_node=[1], repeats=2, logs=str(tmp_path / "logs"))
    conf["second_pass"] = {"target": 1e-6, "max_repeats": 3, "max_seconds": 1000, **second}
    path = tmp_path / "config.yaml"
    path.write_text(yaml.safe_dump(conf))
    proc = subprocess.run(SNAKEMAKE + ["--configfile", str(path)], cwd=ROOT, capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr[-4000:]
    return path, Path(conf["results"]), proc.stdout


def test_a_study_runs_the_repeats_its_first_pass_asks_for_and_says_so(tmp_path):
    """A target no run meets: the one configuration gets its third repeat, in every table, and a
    second snakemake has nothing to do."""
    path, results, said = _study(tmp_path)
    assert "dlscale: 3 of 3 runs done, 3 of 3 blocks complete" in said  # the added repeat counts itself
    plan = pd.read_csv(results / paths.TABLES["second_pass"])
    assert plan[["repeats_first", "repeats_planned", "second_pass"]].values.tolist() == [[2, 3, second_pass.BY_REPEATS]]
    assert sorted(pd.read_csv(results / paths.TABLES["runs"])["repeat"]) == [0, 1, 2]
    summary = pd.read_csv(results / paths.TABLES["summary"])
    assert summary[["repeats_ok", "repeats_planned", "second_pass"]].values.tolist() == [[3, 3, second_pass.BY_REPEATS]]
    report = (results / paths.TABLES["report"]).read_text()
    assert "second pass" in report and "1 configuration(s) got more repeats" in report
    again = subprocess.run(SNAKEMAKE + ["--configfile", str(path), "-n"], cwd=ROOT, capture_output=True, text=True)
    assert again.returncode == 0 and "Nothing to be done" in again.stdout + again.stderr
    # the study-time table's row of this study (bench/study_time.py)
    out = tmp_path / "study-time.csv"
    bench = [
        sys.executable,
        str(ROOT / "bench" / "study_time.py"),
        str(results),
        "--elapsed-s",
        "60",
        "--out",
        str(out),
    ]
    assert subprocess.run(bench, capture_output=True, text=True).returncode == 0
    (row,) = pd.read_csv(out).to_dict("records")
    assert (row["runs"], row["configurations"], row["pairs"], row["runs_added"], row["elapsed_s"]) == (3, 1, 0, 1, 60)
    # where its runs' time went (bench/run_cost.py): every part, summing to the runs' time
    out = tmp_path / "run-cost.csv"
    bench = [sys.executable, str(ROOT / "bench" / "run_cost.py"), str(results), "--label", "test", "--out", str(out)]
    assert subprocess.run(bench, capture_output=True, text=True).returncode == 0
    rows = pd.read_csv(out)
    assert rows["framework"].tolist() == ["torch", "all"] and rows["runs"].tolist() == [3, 3]
    parts = rows[[f"{p}_s" for p in ("start", *cost.AFTER)]].sum(axis=1)
    assert parts.iloc[-1] == pytest.approx(rows["elapsed_s"].iloc[-1], abs=0.5)
    assert rows[[f"{p}_s" for p in cost.STARTUP]].notna().all().all()


def test_a_study_without_seconds_to_spare_adds_no_run(tmp_path):
    _, results, said = _study(tmp_path, max_seconds=0.001)
    assert "dlscale: 1 of 2 runs done, 1 of 2 blocks complete; the runs left take about" in said
    plan = pd.read_csv(results / paths.TABLES["second_pass"])
    assert plan[["repeats_planned", "second_pass"]].values.tolist() == [[2, second_pass.BY_SECONDS]]
    assert sorted(pd.read_csv(results / paths.TABLES["runs"])["repeat"]) == [0, 1]
    assert set(CONFIG_KEYS) <= set(plan.columns)
