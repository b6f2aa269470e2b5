"""Real MPI ranks through real Horovod and PyTorch."""

import json
import math
import os
import sys

import numpy as np
import pytest
import torch

from harness import config as cfg
from harness import launch
from harness.records import PHASE_KEYS, parse_file
from tests.conftest import ROOT, tiny_config
from workloads.registry import build_model
from workloads.train import SyntheticData

ENV_RECORD = {"python": sys.executable, "key": "test", "mpi": {}, "pins": {}}


def run_two_ranks(tmp_path, spec, script):
    spec_path = tmp_path / "spec.json"
    spec_path.write_text(json.dumps(spec))
    argv = launch.mpirun_argv(["localhost"], 2, {"name": "mpirun", "bind_to": "none"},
                              [sys.executable, str(script), str(spec_path)],
                              launch.rank_env({"threads_per_rank": 1, "launcher": {}}),
                              as_root=os.geteuid() == 0)
    rc, timed_out = launch.execute(argv, tmp_path / "log", timeout_s=180)
    assert rc == 0 and not timed_out, (tmp_path / "log").read_text()


def load(path):
    with np.load(path) as f:
        return [f[k] for k in sorted(f.files, key=lambda k: int(k.split("_")[1]))]


@pytest.mark.parametrize("comm", ["overlap", "sequential"])
def test_two_ranks_average_gradients(tmp_path, comm):
    spec = {"framework": "torch", "model": "tinynet", "comm": comm, "classes": 10, "image_size": 64,
            "batch_size": 4, "threads_per_rank": 1, "precision": "fp32", "lr": 0.1, "momentum": 0.9,
            "seed": 3, "out_dir": str(tmp_path)}
    run_two_ranks(tmp_path, spec, ROOT / "tests" / "mpi_one_step.py")
    rank0, rank1 = load(tmp_path / "rank0.npz"), load(tmp_path / "rank1.npz")
    for a, b in zip(rank0, rank1):
        assert np.array_equal(a, b), "ranks hold different weights after one step"

    # One process stepping on both ranks' batches together, from the same initial weights.
    torch.manual_seed(spec["seed"])
    model = build_model("torch", "tinynet", spec["classes"])
    for p, init in zip(model.parameters(), load(tmp_path / "init.npz")):
        assert np.array_equal(p.detach().numpy(), init), "rank 0 did not start from the seeded weights"
    batches = [SyntheticData(spec["seed"], r, 4, 64, 10)(0) for r in (0, 1)]
    x = torch.from_numpy(np.concatenate([b[0] for b in batches]))
    y = torch.from_numpy(np.concatenate([b[1] for b in batches]))
    opt = torch.optim.SGD(model.parameters(), lr=spec["lr"], momentum=spec["momentum"])
    torch.nn.functional.cross_entropy(model(x), y).backward()
    opt.step()
    expected = [p.detach().numpy() for p in model.parameters()]
    for got, want, init in zip(rank0, expected, load(tmp_path / "init.npz")):
        assert not np.allclose(want, init), "the step changed nothing; the test would prove nothing"
        np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)


def test_phases_add_up_to_wall_time(tmp_path):
    conf = tiny_config(tmp_path, iterations=8, batch_size=[8], model=["googlenet"])
    run = {"framework": "torch", "model": "googlenet", "comm": "overlap", "nodes": 1,
           "ranks_per_node": 2, "batch_size": 8, "repeat": 0}
    status = launch.launch(conf, run, ENV_RECORD)
    assert status["status"] == "ok", status
    run_dir, _, _ = cfg.run_files(conf, run)
    for rank in (0, 1):
        recs, errors = parse_file(run_dir / f"rank{rank}.jsonl")
        assert errors == []
        run_rec = recs[0]
        assert run_rec["kind"] == "run" and run_rec["rank"] == rank and run_rec["size"] == 2
        assert run_rec["provenance"]["framework"]["intra_op_threads"] == 1
        steps = [r for r in recs if r["kind"] == "step"]
        assert [s["warmup"] for s in steps] == [True] + [False] * 8
        for s in steps[1:]:
            phase_sum = sum(s[k] for k in PHASE_KEYS)
            assert abs(s["wall_s"] - phase_sum) <= 0.03 * s["wall_s"], s
            assert s["forward_s"] > 0 and s["backward_s"] > 0 and math.isfinite(s["loss"])


def test_timeout_kills_run_and_keeps_logs(tmp_path):
    conf = tiny_config(tmp_path, run_timeout_s=1, iterations=100000)
    run = {"framework": "torch", "model": "tinynet", "comm": "overlap", "nodes": 1,
           "ranks_per_node": 2, "batch_size": 4, "repeat": 0}
    status = launch.launch(conf, run, ENV_RECORD)
    assert status["status"] == "failed"
    assert status["reasons"][0] == "timed out after 1 s; job killed"
    run_dir, log, attempts = cfg.run_files(conf, run)
    saved = json.loads((run_dir / "status.json").read_text())
    assert saved["status"] == "failed" and "timed out" in saved["reasons"][0] and log.exists()
    # a second attempt moves the first one's files aside instead of overwriting them
    launch.launch(conf, run, ENV_RECORD)
    kept = list(attempts.iterdir())
    assert len(kept) == 1 and (kept[0] / "status.json").exists()
