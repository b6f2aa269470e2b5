"""Allreduce sweep: the model maths on known numbers, and a real 2-rank sweep through mpirun."""

import json
import sys

import numpy as np
import pytest

from dlscale.analysis import comm, prediction
from dlscale.core import ring
from dlscale.runtime import allreduce, launch
from dlscale.runtime import config as cfg
from dlscale.workloads import frameworks
from tests.conftest import ENV_RECORD, env_record, mpirun_module, needs_emulation, tiny_config


def test_sizes_and_repetitions():
    assert allreduce.sizes(1024) == [4, 16, 64, 256, 1024]
    assert allreduce.sizes(1000)[-1] == 1000
    assert allreduce.sizes()[-1] == 256 * allreduce.MIB
    assert not allreduce.enough([1e-5] * 49) and allreduce.enough([1e-5] * 50)  # fast: at most 50
    assert not allreduce.enough([3.0] * 4) and allreduce.enough([3.0] * 5)  # slow: at least 5
    assert not allreduce.enough([0.1] * 19) and allreduce.enough([0.1] * 20)  # else 2 s of allreduces


def test_bus_bandwidth_follows_nccl_tests():
    assert ring.bus_bandwidth(10.0, 2) == pytest.approx(10.0)
    assert ring.bus_bandwidth(10.0, 8) == pytest.approx(17.5)


def test_fit_recovers_known_alpha_beta():
    alpha, beta, ranks = 20e-6, 1 / 1.25e9, 4  # 20 us, 10 Gbit/s
    nbytes = allreduce.sizes(64 * allreduce.MIB)
    times = [ring.ring_time(m, ranks, alpha, beta) for m in nbytes]
    a, b, err = ring.fit_ring(nbytes, times, ranks)
    assert a == pytest.approx(alpha, rel=1e-6) and b == pytest.approx(beta, rel=1e-6) and err < 1e-9
    noisy = [t * (1.1 if i % 2 else 0.9) for i, t in enumerate(times)]
    a, b, err = ring.fit_ring(nbytes, noisy, ranks)  # +-10% noise: close fit, error near 10%
    assert a == pytest.approx(alpha, rel=0.2) and b == pytest.approx(beta, rel=0.2) and 0.05 < err < 0.15
    with pytest.raises(ValueError, match="at least 2 ranks"):
        ring.fit_ring(nbytes, times, 1)


def test_real_two_rank_sweep_of_both_paths_parses_and_fits(tmp_path):
    out = tmp_path / "sweep.jsonl"
    args = [out, "--max-bytes", 4 << 20]
    rc, timed_out = mpirun_module(sys.executable, "dlscale.runtime.allreduce", args, tmp_path / "log", timeout_s=120)
    assert rc == 0 and not timed_out, (tmp_path / "log").read_text()
    rows = [json.loads(line) for line in out.read_text().splitlines()]
    many = [m for m in allreduce.sizes(4 << 20) if 128 * 4 <= m <= 1 << 20]
    one = [m for m in allreduce.sizes(4 << 20) if m >= ring.ONE_MIN_BYTES]
    assert [(r["path"], r["bytes"]) for r in rows] == [
        (p, m) for p in allreduce.PATHS[:2] for m in allreduce.sizes(4 << 20)
    ] + [("horovod_tensors", m) for m in many] + [("horovod_one", m) for m in one]
    assert all(
        r["ranks"] == 2 and allreduce.enough(r["times_s"]) and not allreduce.enough(r["times_s"][:-1]) for r in rows
    )
    assert {r["transport"] for r in rows} == {
        "mpi (host memory)",
        "horovod mpi (host memory, 4 tensors fused, PyTorch's binding)",
        "horovod mpi (host memory, 128 tensors fused, PyTorch's binding)",
        "horovod mpi (host memory, 1 tensor, no fusion buffer, PyTorch's binding)",
    }
    table, fits = comm.tables([(out, 2, 1)])
    assert len(table) == len(rows) and set(fits["path"]) == set(allreduce.PATHS)
    # Structure only: how the times compare (4 MiB against 4 B, Horovod against MPI, 128 tensors
    # against 4) is what the sweep measures, and within noise on a busy machine (Horovod's 4 MiB and
    # 4 B both inside its 1 ms cycle; a per-tensor cost of -5.9e-8 s seen on an idle one)
    assert (table["median_s"] > 0).all()
    assert (table["min_s"] <= table["median_s"]).all() and (table["median_s"] <= table["max_s"]).all()
    # every size says the cores its ranks used meanwhile: a reducing process computes (a rank has one
    # main thread and Horovod's; neither sleeps through an allreduce, so neither 0 nor beyond a few)
    assert table["cores_used"].between(0.05, 4.0).all(), table["cores_used"].tolist()
    assert fits["failure"].eq("").all()
    assert np.isfinite(fits[["alpha_s", "beta_s_per_byte"]].to_numpy(float)).all()
    # the model reads T(m) from Horovod's path, and its per-tensor cost from horovod_tensors against it
    cost = prediction.costs(table, fits)[(2, 1, "horovod")]
    per_tensor = cost.per_tensor
    horovod = table[table["path"] == "horovod"].set_index("bytes")["median_s"]
    assert cost(4 << 20) == pytest.approx(horovod[4 << 20])
    many = table[table["path"] == "horovod_tensors"].set_index("bytes")["median_s"]
    extra = (many - horovod[many.index]) / (128 - 4)
    assert fits.set_index("path")["per_tensor_s"]["horovod"] == pytest.approx(extra.median())
    assert per_tensor == pytest.approx(max(0.0, extra.median()))  # the model takes no negative cost
    assert fits.set_index("path")["per_tensor_s"].drop("horovod").isna().all()


def test_failed_sweep_is_recorded_and_the_table_says_why(tmp_path):
    conf = tiny_config(tmp_path)
    conf["launcher"]["extra_args"] = ["--no-such-mpirun-option"]
    out = tmp_path / "sweep.jsonl"
    launch.sweep_allreduce(
        conf, launch.Measurement(1, 2, {"python": sys.executable}, out, tmp_path / "log", tmp_path / "attempts")
    )
    table, fits = comm.tables([(out, 1, 2)])
    assert table.empty
    # with what mpirun said, right after its exit code
    assert (
        fits["failure"].item() == 'mpirun exited with code 1; mpirun: Error: unknown option "--no-such-mpirun-option"'
    )
    # every sweep is kept with its log, also after it is redone (Snakemake first deletes both)
    first = out.read_text()
    out.unlink()
    (tmp_path / "log").unlink()
    launch.sweep_allreduce(
        conf, launch.Measurement(1, 2, {"python": sys.executable}, out, tmp_path / "log", tmp_path / "attempts")
    )
    kept = sorted((tmp_path / "attempts").iterdir())
    assert len(kept) == 2 and (kept[0] / "sweep.jsonl").read_text() == first
    assert "no-such-mpirun-option" in (kept[0] / "log").read_text()


@needs_emulation
def test_sweep_killed_by_its_timeout_keeps_the_sizes_it_measured_and_the_model_does_not_use_them(tmp_path):
    # 2 emulated nodes at 8 Mbit/s: the sizes to 1 MiB take ~10 s, one allreduce of 16 MiB 16 s
    conf = tiny_config(
        tmp_path,
        nodes=[1, 2],
        ranks_per_node=[1],
        emulate={"rate_mbit": 8},
        run_timeout_s=40,
        allreduce_max_bytes=16 * allreduce.MIB,
    )
    out = tmp_path / "sweep.jsonl"
    out.write_text("left by an earlier job\n")  # never read as this job's
    launch.sweep_allreduce(
        conf, launch.Measurement(2, 1, {"python": sys.executable}, out, tmp_path / "log", tmp_path / "attempts")
    )
    table, fits = comm.tables([(out, 2, 1)])
    *measured, last = out.read_text().splitlines()
    assert json.loads(last)["failed"] == "timed out after 40 s; job killed"
    assert len(measured) == len(table) and len(table) >= 3 and table["bytes"].max() < 16 * allreduce.MIB
    assert fits["failure"].str.startswith("timed out after 40 s").all() and fits["alpha_s"].isna().all()
    assert (2, 1, "horovod") not in prediction.costs(
        table, fits
    )  # a cut sweep's T(m) would stop at the sizes it reached
    [kept] = (tmp_path / "attempts").iterdir()
    assert (kept / "sweep.jsonl").read_text() == out.read_text()


def test_gpu_sweep_without_a_gpu_is_recorded_with_the_reason(tmp_path):
    conf = tiny_config(tmp_path, device="gpu")
    out = tmp_path / "sweep.jsonl"
    launch.sweep_allreduce(
        conf, launch.Measurement(1, 2, {"python": sys.executable}, out, tmp_path / "log", tmp_path / "attempts")
    )
    table, fits = comm.tables([(out, 1, 2)])
    assert table.empty
    failure = fits["failure"].item()
    assert failure.startswith("mpirun exited with code 1"), failure
    assert "allreduce sweep on device gpu: PyTorch" in failure and "sees 0 GPU(s)" in failure, failure


@pytest.mark.parametrize("native", ["jax", "torch", "tensorflow"])
def test_a_study_with_native_runs_sweeps_their_own_library_and_the_model_predicts_them_from_it(tmp_path, native):
    """A study that runs a framework through its own library sweeps its path too (JAX's pmean, in
    JAX's own environment, in a job of its own; PyTorch's process group; averaging: element 0 stays
    1); a study without it sweeps none; a study that runs nothing through Horovod sweeps no Horovod
    path (and needs no framework's binding); the model's costs hold the libraries apart."""
    out, log = tmp_path / "sweep.jsonl", tmp_path / "log"
    conf = tiny_config(tmp_path, framework=[native], allreduce_library=["native"], allreduce_max_bytes=1 << 16)
    apart = {native: env_record(native)}
    launch.sweep_allreduce(conf, launch.Measurement(1, 2, ENV_RECORD, out, log, tmp_path / "attempts"), apart)
    assert "failed" not in out.read_text(), log.read_text()[-3000:]
    swept = {json.loads(line)["path"] for line in out.read_text().splitlines()}
    assert swept == {"mpi", native, f"{native}_tensors"}
    assert f"--- {native}'s native path, in " in log.read_text()
    rows = [json.loads(line) for line in out.read_text().splitlines()]
    own_rows = [r for r in rows if r["path"] == native]
    assert [r["bytes"] for r in own_rows] == allreduce.sizes(1 << 16)
    assert [r["bytes"] for r in rows if r["path"] == f"{native}_tensors"] == [
        m for m in allreduce.sizes(1 << 16) if ring.MANY_PIECES * 4 <= m
    ]
    assert all(r["transport"].startswith(frameworks.get(native).NATIVE.split(" ")[0]) for r in own_rows)
    assert allreduce._own_paths([]) == [] and {r["path"] for r in rows} & set(frameworks.NAMES) == {native}
    table, fits = comm.tables([(out, 2, 1)])
    costs = prediction.costs(table, fits)
    assert {(2, 1, "horovod"), (2, 1, native)} <= set(costs) and (2, 1, f"{native}_tensors") not in costs
    own_times = table[table["path"] == native].set_index("bytes")["median_s"]
    assert costs[(2, 1, native)](1 << 16) == pytest.approx(own_times[1 << 16])
    per_tensor = fits.set_index("path")["per_tensor_s"]
    assert costs[(2, 1, native)].per_tensor == pytest.approx(max(0.0, per_tensor[native]))  # from <native>_tensors


def test_fit_takes_the_links_bandwidth_where_small_sizes_sit_on_horovods_cycle():
    """As on the emulated 500 Mbit/s cluster: every size below about 100 KB takes Horovod's 1 ms
    cycle. A fit of relative errors took beta from those (22% low there); the weighted fit takes it
    from the sizes whose time is bandwidth."""
    beta, ranks = 1 / 62.5e6, 2
    nbytes = allreduce.sizes(64 * allreduce.MIB)
    times = [max(1e-3, ring.ring_time(m, ranks, 20e-6, beta)) * 1.06 for m in nbytes]
    _, b, _ = ring.fit_ring(nbytes, times, ranks)
    assert b == pytest.approx(1.06 * beta, rel=0.05)


def test_each_horovod_framework_is_swept_through_its_own_binding_and_the_model_times_it_there(tmp_path):
    """A study that runs PyTorch and MXNet through Horovod with `allreduce_bindings: each` sweeps
    Horovod through PyTorch's binding (the instrument) and again through MXNet's, in MXNet's own
    environment, in a job of its own, as `horovod:mxnet` (its three paths); the model times MXNet's
    gradients on MXNet's paths and PyTorch's on the instrument's, and a sweep without the binding's
    paths falls back to the instrument's for both."""
    out, log = tmp_path / "sweep.jsonl", tmp_path / "log"
    conf = tiny_config(tmp_path, framework=["torch", "mxnet"], allreduce_max_bytes=1 << 16, allreduce_bindings="each")
    assert cfg.swept_apart(conf) == ["mxnet"] and cfg.swept_apart({**conf, "allreduce_bindings": "instrument"}) == []
    apart = {"mxnet": env_record("mxnet"), "torch": env_record("torch")}  # the instrument's is not apart
    launch.sweep_allreduce(conf, launch.Measurement(1, 2, ENV_RECORD, out, log, tmp_path / "attempts"), apart)
    rows = [json.loads(line) for line in out.read_text().splitlines()]
    assert "failed" not in out.read_text(), log.read_text()[-3000:]
    mine = frameworks.binding_path("mxnet")
    assert [r["path"] for r in rows if r["path"].startswith(mine)] == [mine] * len(allreduce.sizes(1 << 16)) + [
        f"{mine}_tensors"
    ] * len([m for m in allreduce.sizes(1 << 16) if ring.MANY_PIECES * 4 <= m]) + [f"{mine}_one"]
    assert {r["transport"] for r in rows if r["path"] == mine} == {
        "horovod mpi (host memory, 4 tensors fused, MXNet's binding)"
    }
    assert "--- mxnet's Horovod binding, in " in log.read_text() and "--- torch's" not in log.read_text()
    table, fits = comm.tables([(out, 1, 2)])
    costs = prediction.costs(table, fits)
    run = {"allreduce_library": "horovod"}
    assert prediction.library(run | {"framework": "mxnet"}, (1, 2), costs) == mine
    assert prediction.library(run | {"framework": "torch"}, (1, 2), costs) == "horovod"
    assert costs[(1, 2, mine)](1 << 16) == pytest.approx(table[table["path"] == mine]["median_s"].iloc[-1])
    without = prediction.costs(table[~table["path"].str.startswith(mine)], fits[~fits["path"].str.startswith(mine)])
    assert prediction.library(run | {"framework": "mxnet"}, (1, 2), without) == "horovod"
