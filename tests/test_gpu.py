"""The PyTorch GPU path on a real NVIDIA GPU: where each wait waits, what h2d copies, and a native
run's trace. Skipped, with the reason, where there is no CUDA GPU or no Horovod (CI has neither
a GPU nor, there, a GPU build); run on the lent H100 as the README's GPU section says."""

import json
import os
import subprocess
import sys

import pytest

from tests.conftest import ROOT, tiny_run

torch = pytest.importorskip("torch")
pytestmark = pytest.mark.skipif(
    not torch.cuda.is_available(), reason="no CUDA GPU on this machine (CI never has one); checked where one is"
)


def gpu_spec(tmp_path, **over):
    spec = {
        **tiny_run(batch_size=16),
        "image_size": 32,
        "classes": 10,
        "threads_per_rank": 2,
        "precision": "fp32",
        "device": "gpu",
        "warmup": 2,
        "iterations": 4,
        "profile_iterations": 3,
        "autotune": True,
        "tf32": False,
        "lr": 0.01,
        "momentum": 0.9,
        "seed": 0,
        "out_dir": str(tmp_path),
    }
    spec.update(over)
    return spec


@pytest.fixture(scope="module")
def trainer(tmp_path_factory):
    pytest.importorskip("horovod.torch")
    from dlscale.workloads.frameworks.torch import trainer as torch_trainer

    return torch_trainer.Trainer(gpu_spec(tmp_path_factory.mktemp("gpu")))


def sleep_on(stream, seconds):
    """Queue a GPU kernel that spins for about `seconds` on `stream`."""
    rate = torch.cuda.get_device_properties(0).clock_rate * 1e3  # kHz -> cycles/s
    with torch.cuda.stream(stream):
        torch.cuda._sleep(int(seconds * rate))


def test_sync_waits_for_the_compute_stream_and_not_for_other_streams(trainer):
    # Asked of the streams, not of a clock around sync (a busy host stretches any wait): after sync
    # the other stream's 1 s kernel still runs, and the compute stream's is done
    side = torch.cuda.Stream()  # as Horovod's NCCL stream is
    sleep_on(side, 1.0)
    trainer.sync()
    assert not side.query(), "sync waited for work on another stream (an allreduce in flight)"
    torch.cuda.synchronize()
    sleep_on(torch.cuda.current_stream(), 0.3)
    trainer.sync()
    assert torch.cuda.current_stream().query(), "sync returned before the compute stream's work was done"


def test_h2d_copies_from_pinned_host_memory(trainer):
    from dlscale.workloads.batches import SyntheticData

    batch = SyntheticData(0, 0, 16, 32, 10, trainer.data_layout)(0)
    host = trainer.load(batch)
    assert all(t.is_pinned() and t.device.type == "cpu" for t in host)
    dev = trainer.h2d(host)
    trainer.sync()
    assert all(t.device.type == "cuda" for t in dev)
    assert torch.equal(dev[0].cpu(), torch.from_numpy(batch[0])) and torch.equal(
        dev[1].cpu(), torch.from_numpy(batch[1])
    )


@pytest.mark.parametrize("precision", ["fp32", "mixed"])
def test_native_gpu_run_traces_cover_each_iteration(tmp_path, precision):
    pytest.importorskip("horovod.torch")
    from dlscale.analysis import trace

    spec_path = tmp_path / "spec.json"
    spec_path.write_text(json.dumps(gpu_spec(tmp_path, precision=precision)))
    subprocess.run(
        [sys.executable, "-m", "dlscale.workloads.train", str(spec_path)],
        cwd=ROOT,
        check=True,
        timeout=600,
        env={**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")]))},
    )
    framework, events = trace.read(tmp_path / "trace_rank0.json")
    derived = trace.derive(framework, events)
    assert sorted(it for _, it in derived) == [6, 7, 8]
    for p in derived.values():
        covered = sum(p[f"{k}_s"] for k in trace.PHASES)
        assert abs(covered - p["wall_s"]) <= 0.05 * p["wall_s"], p
        assert p["forward_s"] > 0 and p["backward_s"] > 0 and p["h2d_s"] > 0, p


@pytest.mark.parametrize("precision", ["fp32", "mixed"])
def test_native_timing_queues_the_next_iteration_and_trains_as_a_loop_that_waits(tmp_path, precision):
    """Native timing stages iteration i+1 in the other buffer and launches it before it waits for
    iteration i (`ahead` 1); phased timing waits after every phase. Same losses, iteration by
    iteration: no batch was overwritten while its copy was queued (mixed: the fused SGD takes the
    GradScaler's check on the device). PyTorch's own library: no Horovod."""
    losses = {}
    for timing in ("native", "phased"):
        out = tmp_path / timing
        out.mkdir()
        spec = gpu_spec(
            out,
            timing=timing,
            allreduce_library="native",
            profile_iterations=0,
            autotune=False,
            iterations=8,
            precision=precision,
        )
        (out / "spec.json").write_text(json.dumps(spec))
        subprocess.run(
            [sys.executable, "-m", "dlscale.workloads.train", str(out / "spec.json")],
            cwd=ROOT,
            check=True,
            timeout=600,
            env={**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")]))},
        )
        steps = [json.loads(line) for line in (out / "rank0.jsonl").read_text().splitlines()]
        losses[timing] = [s["loss"] for s in steps if s["kind"] == "step"]
    assert len(losses["native"]) == 10
    assert losses["native"] == pytest.approx(losses["phased"], rel=1e-4 if precision == "fp32" else 1e-3)
