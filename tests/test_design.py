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
