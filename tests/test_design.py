"""The blocked run order (dlscale/runtime/design.py): every configuration once in each block, its cells (the
frameworks and libraries the block model compares) back to back, configurations and cells in a seeded order."""

import pytest

from dlscale.runtime import config as cfg
from dlscale.runtime import design

BLOCKED = {"order": "blocked", "seed": 1}


def _study(**overrides):
    return cfg.matrix({**cfg.load(), **overrides})


def _configuration(run_path):  # the run path without its framework and library (the cell) and its repeat
    parts = run_path.split("/")
    return "/".join(parts[1:3] + parts[4:-1])


def _blocks(rows):
    blocks = {}
    for row in sorted(rows, key=lambda r: (r["block"], r["position"])):
        blocks.setdefault(row["block"], []).append(row["run"])
    return blocks


@pytest.mark.parametrize("seed", [1, 2, 7])
def test_each_block_runs_every_configuration_once_with_its_cells_back_to_back(seed):
    runs = _study(repeats=4)
    blocks = _blocks(design.order(runs, {**BLOCKED, "seed": seed}))
    assert len(blocks) == 4
    sequences = []
    for paths in blocks.values():
        configurations = [_configuration(p) for p in paths]
        groups = [c for i, c in enumerate(configurations) if i == 0 or c != configurations[i - 1]]
        assert len(groups) == len(set(groups)) == 4, groups  # each configuration's 4 frameworks in one stretch
        assert sorted(configurations) == sorted(_configuration(p) for p in next(iter(blocks.values())))
        sequences.append((groups, [p.split("/")[0] for p in paths]))
    # seeded afresh in each block: the configurations' order, and the frameworks' within them, are not all alike
    assert len({tuple(g) for g, _ in sequences}) > 1 and len({tuple(f) for _, f in sequences}) > 1


def test_the_order_is_the_snakemake_priority_order_and_a_new_framework_keeps_the_others():
    runs = _study(repeats=2)
    rows = design.order(runs, BLOCKED)
    by_priority = sorted(runs, key=lambda r: -design.priority(r, BLOCKED))
    assert [r["run"] for r in rows] == [design.paths.run_path(r) for r in by_priority]
    fewer = [r["run"] for r in design.order([r for r in runs if r["framework"] != "jax"], BLOCKED)]
    assert fewer == [r["run"] for r in rows if not r["run"].startswith("jax/")]


def test_unordered_leaves_the_order_to_snakemake():
    runs = _study(repeats=2)
    assert {design.priority(r, {"order": "unordered"}) for r in runs} == {0}
    assert {r["position"] for r in design.order(runs, {"order": "unordered"})} == {""}


def test_the_drift_benchmark_reads_a_study_and_sees_its_design(tmp_path):
    """bench/drift.py on the committed example (interleaved, 16 runs a block): its block-long stretches leave the
    block model's own residual spread; the same runs in this design's order are read as cells back to back."""
    import shutil

    import pandas as pd

    from bench import drift
    from tests.conftest import ROOT

    example = ROOT / "docs" / "example"
    row = drift.row(example, "")
    assert (row["design"], row["runs"], row["block_runs"], row["configuration_cells"]) == ("interleaved", 48, 16, 4)
    assert row["sd_log_block_stretch"] == pytest.approx(row["sd_log_block_model"], rel=0.05)
    assert -1 <= row["lag1"] <= 1 and row["sd_log_cells_stretch"] > 0
    for table in ("run_metrics.csv", "runs.csv"):
        shutil.copy(example / table, tmp_path)
    runs = pd.read_csv(example / "run_metrics.csv").to_dict("records")
    pd.DataFrame(design.order(runs, BLOCKED), columns=design.COLUMNS).to_csv(tmp_path / "order.csv", index=False)
    assert drift.row(tmp_path, "")["design"] == "cells back to back"
    out = tmp_path / "drift.csv"
    drift.main([str(example), str(tmp_path), "--out", str(out)])
    drift.main([str(tmp_path), "--out", str(out), "--note", "again"])  # a study's row replaced, the other kept
    assert pd.read_csv(out, keep_default_na=False)["note"].tolist() == ["", "again"]


def _two_level_study(folder, blocks_n, between, within, iterations, fixed_s, seed=3):
    """A study's tables (tidy, run_metrics, runs) of 4 frameworks x `blocks_n` blocks, one configuration: log
    iteration time = framework + block drift (2x) + run (sd `between`) + iteration (sd `within`, independent)."""
    import numpy as np
    import pandas as pd

    from dlscale.analysis import metrics
    from dlscale.core import paths
    from dlscale.core.vocabulary import RUN_KEYS

    rng = np.random.default_rng(seed)
    base = {
        **{"model": "alexnet", "allreduce_schedule": "overlap", "allreduce_library": "horovod", "layout": "best"},
        **{"timing": "native", "nodes": 1, "ranks_per_node": 1, "batch_size": 8, "loader_workers": 1},
        **{"image_size": 64, "classes": 10, "threads_per_rank": 1, "precision": "fp32"},
    }
    tidy, status = [], []
    for block in range(blocks_n):
        drift = rng.uniform(0, np.log(2))
        for i, framework in enumerate(["jax", "mxnet", "tensorflow", "torch"]):
            run = {**base, "framework": framework, "repeat": block}
            times = np.exp(np.log(0.1) + 0.1 * i + drift + rng.normal(0, between) + rng.normal(0, within, iterations))
            step = {"rank": 0, "warmup": False, "profiled": False, "phase": "wall"}
            tidy += [{**run, **step, "iteration": k, "seconds": t} for k, t in enumerate(times)]
            status.append({**run, "status": "ok", "elapsed_s": fixed_s + times.sum()})
    tidy = pd.DataFrame(tidy)
    tidy.to_csv(folder / paths.TABLES["tidy"], index=False)
    metrics.run_table(tidy).to_csv(folder / paths.TABLES["run_metrics"], index=False)
    pd.DataFrame(status)[RUN_KEYS + ["status", "elapsed_s"]].to_csv(folder / paths.TABLES["runs"], index=False)


def test_the_iterations_benchmark_splits_the_spread_within_and_between_runs(tmp_path):
    """bench/iterations.py on studies made with known parts (between-run sd 0.05, iteration sd 0.2, 10 fixed
    seconds a run) gives back both parts and the optimum Kalibera & Jones' formula gives for them at the study's
    own iteration time (about 31 iterations); 120 iterations cost clearly more time for the same interval than
    the optimum, 30 about none; with no between-run spread the optimum is far more iterations (or none)."""
    import pandas as pd

    from bench import iterations

    def made(name, **parts):
        folder = tmp_path / name
        folder.mkdir()
        _two_level_study(folder, **{"blocks_n": 40, "between": 0.05, "within": 0.2, "fixed_s": 10.0, **parts})
        (row,) = iterations.configurations(folder).to_dict("records")
        return folder, row

    folder, row = made("known", iterations=20)
    assert (row["runs"], row["iterations"], row["run_fixed_s"]) == (160, 20, pytest.approx(10.0, abs=0.01))
    assert row["sd_log_iteration"] == pytest.approx(0.2, rel=0.05) and abs(row["lag1"]) < 0.08
    assert row["sd_log_within"] == pytest.approx(0.2 / 20**0.5, rel=0.1)
    assert row["sd_log_between"] == pytest.approx(0.05, rel=0.25)
    formula = (10.0 * 0.2**2 / (row["iteration_s"] * 0.05**2)) ** 0.5
    assert row["optimal_iterations"] == pytest.approx(formula, rel=0.4)
    assert made("many", iterations=120, blocks_n=20)[1]["time_ratio"] > 1.25
    assert made("tuned", iterations=30)[1]["time_ratio"] < 1.05
    flat = made("flat", iterations=20, between=0.0)[1]
    assert flat["sd_log_between"] < 0.035 and (
        flat["optimal_iterations"] == "" or flat["optimal_iterations"] > 1.5 * formula
    )
    out = tmp_path / "iterations.csv"
    iterations.main([str(folder), "--name", "known", "--out", str(out)])
    iterations.main([str(tmp_path / "tuned"), "--out", str(out), "--note", "again"])  # rows replaced, others kept
    assert pd.read_csv(out, keep_default_na=False)["study"].tolist() == ["known", str(tmp_path / "tuned")]
