"""Native timing's loop (dlscale/workloads/train.py `native_loop`): the next iteration is queued before the
last one is waited for, at most `ahead` iterations, and each iteration's time runs from the previous
one's end to its own.

The GPU case is checked on a device simulated on a virtual clock, from the costs of a real PyTorch
AlexNet run recorded on an NVIDIA H100 (tests/data; batch 64, 224x224, fp32, three traced
iterations): per iteration, the host's work before its first device operation (staging the batch),
the host's work before it waited (staging and launching) and the device's busy time. CI has no GPU;
the real frameworks run the same loop on the CPU, checked here for the one thing a simulation cannot
show: that no iteration's work lands in another's time (JAX's CPU dispatch of a donating step ran the
step before it returned, so one iteration queued ahead put each step into the previous one's time).
"""

import gzip
import json
import types

import pytest

from dlscale.core import paths, samples
from dlscale.core.processes import CpuMeter
from dlscale.core.records import parse_file
from dlscale.runtime import launch
from dlscale.workloads import frameworks, train
from tests.conftest import ROOT, env_record, tiny_config, tiny_run

TRACE = ROOT / "tests" / "data" / "trace-gpu-h100-torch-alexnet.json.gz"


def traced_costs():
    """[(head_s, host_s, busy_s)] of each traced iteration of the H100 trace."""
    events = json.loads(gzip.decompress(TRACE.read_bytes()))["traceEvents"]
    costs = []
    for it in (e for e in events if e.get("cat") == "dlscale" and e.get("name") == "iteration"):
        t0, t1 = it["ts"], it["ts"] + it["dur"]
        inside = [e for e in events if e.get("ph") == "X" and t0 <= e["ts"] < t1]
        device = sorted(
            (e["ts"], e["ts"] + e["dur"])
            for e in inside
            if e.get("args", {}).get("source_cat") == "cuda" and not e["name"].startswith("dlscale:")
        )
        wait = min(e["ts"] for e in inside if e["name"] == "cudaStreamSynchronize")
        busy, end = 0.0, float("-inf")
        for a, b in device:
            busy, end = (busy + b - max(a, end), b) if b > end else (busy, end)
        costs.append(((device[0][0] - t0) / 1e6, (wait - t0) / 1e6, busy / 1e6))
    return costs


class Clock:
    def __init__(self):
        self.now = 0.0

    def perf_counter(self):
        return self.now


class SimulatedGpu:
    """A Trainer's native-timing surface over a simulated device: `step` spends the host's time on
    the clock and queues the device's work, which starts once the host has staged the batch and the
    device is free, and cannot end before the host has launched its last operation."""

    rank, size = 0, 1

    def __init__(self, clock, costs, ahead, host_speed=1.0):
        self.clock, self.costs, self.ahead = clock, costs, ahead
        self.host_speed = host_speed
        self.device_free = 0.0
        self.idle = []  # the device's idle time before each iteration's work
        self.ends = []  # when each iteration's work ended on the device
        self.in_flight = 0
        self.most_in_flight = 0

    def step(self, fetch):
        head, host, busy = self.costs[fetch() % len(self.costs)]
        head, host = head / self.host_speed, host / self.host_speed
        start = self.clock.now
        begin = max(start + head, self.device_free)
        self.idle.append(begin - self.device_free)
        self.device_free = max(begin + busy, start + host)
        self.ends.append(self.device_free)
        self.clock.now = start + host
        return self.device_free  # the loss handle: when the iteration ends on the device

    def queued(self, loss):
        self.in_flight += 1
        self.most_in_flight = max(self.most_in_flight, self.in_flight)
        return loss

    def finish(self, end):
        self.clock.now = max(self.clock.now, end)
        self.in_flight -= 1
        return 1.0

    def gradient_ready(self):
        return None


class Records:
    def __init__(self):
        self.steps = []

    def write(self, kind, **fields):
        self.steps.append(fields)


def run(monkeypatch, ahead, host_speed=1.0, warmup=3, total=40):
    clock = Clock()
    monkeypatch.setattr(train, "time", types.SimpleNamespace(perf_counter=clock.perf_counter))
    gpu = SimulatedGpu(clock, traced_costs(), ahead, host_speed)
    records = Records()
    train.native_loop(gpu, lambda it: it, records, warmup, samples.Enough(total - warmup), CpuMeter())
    measured = [r["wall_s"] for r in records.steps if not r["warmup"]]
    return gpu, records, measured, clock.now


def bare_throughput(monkeypatch, host_speed):
    """A bare loop: queues every iteration and waits once at the end (iterations per second after
    the same warm-up)."""
    gpu, _, measured, _ = run(monkeypatch, ahead=10**6, host_speed=host_speed)
    return len(measured) / (gpu.ends[-1] - gpu.ends[-len(measured) - 1])


def test_the_trace_gives_the_costs_the_test_relies_on():
    costs = traced_costs()
    assert len(costs) == 3
    for head, host, busy in costs:
        # measured: staging 2.7-5.9 ms, launching done at 9.9-17.9 ms, device busy 7.9 ms
        assert 0 < head < host and 0.005 < busy < 0.010, (head, host, busy)


@pytest.mark.parametrize("host_speed", [1.0, 3.0], ids=["as traced (host-bound)", "host 3x as fast (device-bound)"])
def test_queueing_one_ahead_runs_at_the_bare_loops_speed(monkeypatch, host_speed):
    bare = bare_throughput(monkeypatch, host_speed)
    _, _, one_ahead, _ = run(monkeypatch, ahead=1, host_speed=host_speed)
    assert len(one_ahead) / sum(one_ahead) >= 0.99 * bare


def test_one_wait_per_iteration_would_miss_the_bare_loops_speed_when_device_bound(monkeypatch):
    """What the loop did before (the GPU at 0.75-0.80 of the bare loop): the test above can fail."""
    _, _, waiting, _ = run(monkeypatch, ahead=0, host_speed=3.0)
    assert len(waiting) / sum(waiting) < 0.9 * bare_throughput(monkeypatch, 3.0)


def test_a_device_bound_run_never_leaves_the_device_idle(monkeypatch):
    gpu, _, _, _ = run(monkeypatch, ahead=1, host_speed=3.0, warmup=3)
    assert max(gpu.idle[4:]) == pytest.approx(0.0, abs=1e-12)
    waiting, _, _, _ = run(monkeypatch, ahead=0, host_speed=3.0, warmup=3)
    assert min(waiting.idle[4:]) > 0.0005  # the staging of each batch, on the device's time


def test_at_most_one_iteration_is_queued_ahead_and_records_keep_order(monkeypatch):
    gpu, records, _, _ = run(monkeypatch, ahead=1, total=12)
    assert gpu.most_in_flight == 2  # the one running and the one queued behind it
    assert [r["iteration"] for r in records.steps] == list(range(12))
    assert [r["warmup"] for r in records.steps] == [True] * 3 + [False] * 9


def test_iteration_times_run_from_end_to_end_and_sum_to_the_loops_time(monkeypatch):
    gpu, records, _, elapsed = run(monkeypatch, ahead=1, host_speed=3.0, total=20)
    walls = [r["wall_s"] for r in records.steps]
    assert sum(walls) == pytest.approx(elapsed)
    # device-bound: each iteration's time is the device's, end to end
    assert walls[1:] == pytest.approx([b - a for a, b in zip(gpu.ends, gpu.ends[1:])])


@pytest.mark.parametrize("framework", frameworks.NAMES)
def test_each_real_iteration_records_its_own_work(tmp_path, framework):
    """Every measured iteration of a real native run takes about the same time: none recorded near
    zero because its work ran inside another's (AlexNet at 64x64 steps in 0.1-0.3 s here)."""
    conf = tiny_config(tmp_path, iterations=6, framework=[framework], model=["alexnet"], image_size=64)
    run = tiny_run(framework=framework, model="alexnet", batch_size=8)
    status = launch.launch(conf, run, env_record(run["framework"]))
    assert status["status"] == "ok", status
    records, errors = parse_file(paths.run_files(conf, run)[0] / "rank0.jsonl")
    walls = [r["wall_s"] for r in records if r["kind"] == "step" and not r["warmup"] and not r["profiled"]]
    median = sorted(walls)[len(walls) // 2]
    assert errors == [] and len(walls) == 6 and min(walls) > 0.4 * median, walls
