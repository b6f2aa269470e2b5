"""Blocks added until the comparisons are answered (dlscale/analysis/sequential.py): on simulated
studies, the rule stops early where the first blocks answer, goes on to max_blocks where they do not,
stops at the budget and where the ratio is within the noise; and a real Snakemake study whose look
adds the block it decides."""

import math
import subprocess
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import yaml

from bench import block_error
from dlscale.analysis import blocks, sequential
from dlscale.core import paths
from dlscale.core.errors import ConfigError
from dlscale.runtime import config as cfg
from tests.conftest import ROOT, SNAKEMAKE, tiny_config

SETTINGS = {"max_blocks": 8, "budget_minutes": 10}


def _look(effects, blocks_n, sd, look=0, settings=SETTINGS, run_s=20.0, seed=1, **more):
    runs = block_error.simulated(np.random.default_rng(seed), effects, blocks_n, sd, drift=2.0)
    status = runs.assign(status="ok", elapsed_s=run_s)
    return sequential.plan(runs, status, look, settings, repeats=3, **more).iloc[0]


def test_the_error_is_split_over_the_looks():
    assert sequential.looks(SETTINGS, 3) == 6 and sequential.alpha({"until_resolved": SETTINGS}, 3) == 0.05 / 6
    assert sequential.alpha({"order": "blocked"}, 3) == 0.05


def test_it_stops_early_where_the_planned_blocks_answer():
    row = _look({"mxnet": math.log(1.5), "torch": 0.0, "tensorflow": 0.0}, 3, sd=0.01)
    assert (row["decision"], row["unresolved"], row["pairs"]) == (sequential.ANSWERED, 0, 3)
    assert row["alpha"] == pytest.approx(0.05 / 6)


def test_it_adds_a_block_where_more_would_answer_and_stops_at_max_blocks():
    effects = {"mxnet": math.log(1.1), "torch": 0.0, "tensorflow": 0.0}
    row = _look(effects, 3, sd=0.04)
    assert row["decision"] == sequential.ADDED and 3 < row["blocks_needed"] <= 8
    assert row["run_s"] == pytest.approx(3 * 20.0)  # a whole block: each framework's mean run time
    last = _look(effects, 8, sd=0.3, look=5, final=True)
    assert last["decision"] == sequential.LAST and last["unresolved"] > 0


def test_a_ratio_within_the_noise_gets_no_block():
    row = _look({"mxnet": math.log(1.02), "torch": 0.0, "tensorflow": 0.0}, 3, sd=0.2)
    assert row["decision"] == sequential.NOISE and row["blocks_needed"] > 8


def test_one_pair_within_reach_gets_its_configuration_a_block_beside_one_that_never_will_be():
    """torch and tensorflow identical (equal needs more blocks than max_blocks at this spread), MXNet 15% faster
    (resolvable within it): the block is added, for the closest pair."""
    effects = {"mxnet": math.log(1.15), "torch": 0.0, "tensorflow": 0.0}
    runs = block_error.simulated(np.random.default_rng(2), effects, 3, 0.06, drift=2.0)
    rows, _ = blocks.pair_rows(runs, 0.05 / 6)
    needed = sorted(pd.concat([rows, blocks.decide(rows, 0.05 / 6)], axis=1)["blocks_needed"])
    assert needed[0] <= 8 < needed[-1], needed
    row = _look(effects, 3, sd=0.06, seed=2)
    assert (row["decision"], row["unresolved"], row["blocks_needed"]) == (sequential.ADDED, 3, needed[0])


def test_the_budget_stops_it():
    effects = {"mxnet": math.log(1.1), "torch": 0.0, "tensorflow": 0.0}
    row = _look(effects, 3, sd=0.04, settings={"max_blocks": 8, "budget_minutes": 0.5})  # 30 s < 3 x 20 s
    assert row["decision"] == sequential.BUDGET


def test_the_added_block_is_every_framework_of_the_configurations_chosen(tmp_path):
    conf = tiny_config(tmp_path, framework=["torch", "mxnet"], ranks_per_node=[1, 2], repeats=3)
    matrix = cfg.matrix(conf)
    chosen = pd.DataFrame([{**matrix[0], "decision": sequential.ADDED}])  # its 1-rank configuration
    added = sequential.added_runs(matrix, chosen, 3)
    assert sorted((r["framework"], r["ranks_per_node"], r["repeat"]) for r in added) == [
        ("mxnet", 1, 3),
        ("torch", 1, 3),
    ]
    assert sequential.added_runs(matrix, chosen.assign(decision=sequential.BUDGET), 3) == []


def test_bad_settings_are_refused_naming_the_key(tmp_path):
    conf = tiny_config(tmp_path, repeats=3)
    with pytest.raises(ConfigError, match="design.until_resolved.max_blocks"):
        cfg.check_design(
            {**conf, "design": {"order": "blocked", "until_resolved": {"max_blocks": 3, "budget_minutes": 1}}}
        )
    with pytest.raises(ConfigError, match="needs design.order blocked"):
        cfg.check_design({**conf, "design": {"order": "unordered", "until_resolved": SETTINGS}})


def test_a_study_adds_the_blocks_its_looks_decide(tmp_path):
    """Two frameworks, 2 planned blocks, at most 50, a budget of a block or two of its runs: each
    look's decision is carried out (one more run of each framework where it says `block added`, none
    elsewhere), every table has them, the looks stop (an answer, the budget or the noise), and the
    final analysis says why the configuration stands where it does."""
    conf = tiny_config(tmp_path, framework=["torch", "mxnet"], ranks_per_node=[1], repeats=2)
    conf["logs"] = str(tmp_path / "logs")
    conf["design"] = {"order": "blocked", "seed": 1, "until_resolved": {"max_blocks": 50, "budget_minutes": 0.15}}
    path = tmp_path / "config.yaml"
    path.write_text(yaml.safe_dump(conf))
    proc = subprocess.run(SNAKEMAKE + ["--configfile", str(path)], cwd=ROOT, capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr[-4000:]
    results = Path(conf["results"])
    table = pd.read_csv(results / paths.TABLES["sequential"])
    looks = sorted((results / "looks").glob("look-*.csv"))
    assert list(table["look"]) == list(range(len(looks) + 1)) and table["alpha"].tolist() == pytest.approx(
        [0.05 / 49] * len(table)
    )
    added = int((table["decision"] == sequential.ADDED).sum())
    assert table["decision"].iloc[-1] != sequential.ADDED and table["decision"].iloc[-2] != sequential.ADDED
    assert added == len(looks) - 1  # every look but the last added a block
    runs = pd.read_csv(results / paths.TABLES["runs"])
    assert sorted(runs["repeat"]) == sorted(list(range(2 + added)) * 2)
    # the progress line counts the added runs as planned (it said "5 of 5 runs done, 3 of 3 blocks" after each)
    said = [line for line in proc.stdout.splitlines() if line.startswith("dlscale: ")]
    total, blocks = len(runs), 2 + added
    assert said[-1] == f"dlscale: {total} of {total} runs done, {blocks} of {blocks} blocks complete", said
    if added:
        assert said[4].startswith("dlscale: 5 of 6 runs done, 2 of 3 blocks complete; the runs left take"), said
    pairs = pd.read_csv(results / paths.TABLES["comparisons"])
    assert pairs["blocks"].tolist() == [2 + added]
    assert "blocks added until resolved" in (results / paths.TABLES["report"]).read_text()
    again = subprocess.run(SNAKEMAKE + ["--configfile", str(path), "-n"], cwd=ROOT, capture_output=True, text=True)
    assert again.returncode == 0 and "Nothing to be done" in again.stdout + again.stderr
