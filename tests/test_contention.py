"""What sharing a node costs: the calibration (k copies of a 1-rank run at once, real ranks), its table,
and the model that multiplies a 1-rank run's compute by it."""

import json
import math
import threading
import time

import pandas as pd
import pytest

from dlscale.analysis import contention, model, prediction
from dlscale.core.vocabulary import BACKWARD_S, FORWARD_S, H2D_S, IO_S, UPDATE_S
from dlscale.runtime import contention as calibration
from dlscale.workloads import together
from tests.conftest import env_record, tiny_config, tiny_run

IDENTITY = {
    "framework": "torch",
    "model": "tinynet",
    "allreduce_schedule": "overlap",
    "allreduce_library": "horovod",
    "layout": "best",
    "timing": "native",
    "batch_size": 4,
    "loader_workers": 0,
    "image_size": 64,
    "classes": 10,
    "threads_per_rank": 1,
    "precision": "fp32",
}


def test_the_slowdown_is_the_geometric_mean_of_the_paired_trials_with_a_positive_interval():
    lines = [
        {"alone_s": 1.0, "together_s": 1.2},
        {"alone_s": 2.0, "together_s": 2.6},
        {"alone_s": 1.0, "together_s": 1.25},
    ]
    row = contention.row(IDENTITY, 2, lines)
    assert row["slowdown"] == pytest.approx((1.2 * 1.3 * 1.25) ** (1 / 3))
    assert 0 < row["slowdown_ci_lo"] < row["slowdown"] < row["slowdown_ci_hi"]
    assert (row["trials"], row["failure"], row["ranks_per_node"]) == (3, "", 2)
    one = contention.row(IDENTITY, 2, lines[:1])  # one trial: a slowdown, no interval
    assert one["slowdown"] == pytest.approx(1.2) and math.isnan(one["slowdown_ci_lo"])


def test_a_failed_calibration_has_no_slowdown_and_says_why_and_the_model_assumes_one():
    failed = contention.row(IDENTITY, 2, [{"trial": 0, "failure": "copy 1 of 2 failed: mpirun exited with code 1"}])
    assert failed["trials"] == 0 and failed["failure"].startswith("copy 1 of 2 failed")
    table = pd.DataFrame(
        [failed, contention.row({**IDENTITY, "model": "alexnet"}, 2, [{"alone_s": 1, "together_s": 1.5}])]
    )
    assert contention.slowdowns(table) == {(*{**IDENTITY, "model": "alexnet"}.values(), 2): 1.5}
    run = {**IDENTITY, "nodes": 1, "ranks_per_node": 2}
    assert prediction.slowdown_for(run, contention.slowdowns(table))[0] == 1.0
    assert prediction.slowdown_for(run, contention.slowdowns(table))[1].startswith("assumed 1 (no calibration")
    assert prediction.slowdown_for({**run, "model": "alexnet"}, contention.slowdowns(table)) == (
        1.5,
        "measured (contention.csv)",
    )
    assert prediction.slowdown_for({**run, "nodes": 4, "ranks_per_node": 1}, {}) == (1.0, "one rank per node")


def test_the_model_multiplies_compute_and_gradient_readiness_by_the_slowdown():
    base = {IO_S: 0.01, H2D_S: 0.0, FORWARD_S: 0.1, BACKWARD_S: 0.2, UPDATE_S: 0.02}
    cost = model.ring_cost(2, 1e-4, 1e-9)
    sizes, ready = [4 << 20, 4 << 20], [0.1, 0.2]
    gradients = model.Gradients(sizes, ready)
    alone = model.predict(base, gradients, 2, cost)
    shared = model.predict(base, gradients, 2, cost, slowdown=1.5)
    assert model.predict(base, gradients, 1, cost, slowdown=1.5)["iteration_s"] == pytest.approx(1.5 * 0.33)
    assert shared["iteration_s"] - shared["comm_exposed_s"] == pytest.approx(1.5 * 0.33)
    # the last gradient is ready at the end of backward, both slowed alike: the same exposed tail
    assert shared["comm_exposed_s"] == pytest.approx(alone["comm_exposed_s"])


def test_an_overlapped_allreduce_shares_the_cpus_with_backward_where_the_node_has_none_to_spare():
    """2 ranks of 1 thread on 2 CPUs, allreduces keeping 0.9 cores busy: while both run, compute and
    allreduce each progress at 1 / 1.9 of full speed; on 16 CPUs at full speed; between, in proportion."""
    assert model.shared_rate(1, 2, 2, 0.9) == pytest.approx(1 / 1.9)
    assert model.shared_rate(1, 2, 16, 0.9) == 1.0
    assert model.shared_rate(1, 2, 3, 1.0) == pytest.approx(0.75)  # asks 4 of 3 CPUs
    assert model.shared_rate(1, 2, None, 0.9) == 1.0 and model.shared_rate(1, 2, 2, 0.0) == 1.0
    base = {IO_S: 0.0, H2D_S: 0.0, FORWARD_S: 0.1, BACKWARD_S: 0.2, UPDATE_S: 0.0}
    cost = model.Cost(lambda m: m * 1e-9, cores=1.0)  # 0.1 s for 100 MB alone
    hidden = model.Gradients([10**8], [0.0], cycle=1e-6)  # ready as backward starts
    free = model.predict(base, hidden, 2, cost)
    assert free["iteration_s"] == pytest.approx(0.3) and free["comm_exposed_s"] == 0.0
    assert free["comm_total_s"] == pytest.approx(0.1)
    # at half speed each: 0.2 s of both running does the allreduce's 0.1 s and 0.1 s of backward, whose
    # other 0.1 s then runs alone; the allreduce ran 0.2 s, hidden, and backward took 0.1 s longer
    half = model.predict(base, hidden, 2, cost, rate=0.5)
    assert half["iteration_s"] == pytest.approx(0.4, abs=1e-5) and half["comm_exposed_s"] == 0.0
    assert half["comm_total_s"] == pytest.approx(0.2, abs=1e-5)
    # ready late in backward: the allreduce outlasts it, slowed only while backward still ran
    late = model.Gradients([10**8], [0.15], cycle=1e-6)
    tail = model.predict(base, late, 2, cost, rate=0.5)
    # 0.15 s alone; then 0.1 s at half speed (0.05 of each done); then 0.05 s of allreduce alone
    assert tail["comm_total_s"] == pytest.approx(0.15, abs=1e-5)
    assert tail["comm_exposed_s"] == pytest.approx(0.05, abs=1e-5)
    assert tail["iteration_s"] == pytest.approx(0.1 + 0.25 + 0.05, abs=1e-5)
    # after backward (sequential, or a framework that starts there) nothing is shared: as at full speed
    after = model.Gradients([10**8], None)
    assert model.predict(base, after, 2, cost, rate=0.5) == pytest.approx(model.predict(base, after, 2, cost))
    with pytest.raises(ValueError, match="shared rate 0"):
        model.predict(base, hidden, 2, cost, rate=0.0)


def test_the_model_takes_the_sweeps_cores_and_the_runs_cpus():
    sweep = pd.DataFrame(
        [
            {"nodes": 1, "ranks_per_node": 2, "path": "horovod", "bytes": b, "median_s": b * 1e-9, "cores_used": c}
            for b, c in ((1 << 20, 0.8), (1 << 24, 0.9), (1 << 26, 1.0))
        ]
    )
    fits = pd.DataFrame(columns=["nodes", "ranks_per_node", "path", "alpha_s", "beta_s_per_byte", "per_tensor_s"])
    assert prediction.costs(sweep, fits)[(1, 2, "horovod")].cores == pytest.approx(0.9)
    old = prediction.costs(sweep.drop(columns="cores_used"), fits)[(1, 2, "horovod")]
    assert old.cores == 0.0  # a sweep made before cores were recorded: none assumed
    host = json.dumps({"node0": {"logical_cpus": 2}, "node1": {"logical_cpus": 4}})
    assert prediction.node_cpus({"hardware": host}) == 2 and prediction.node_cpus({"hardware": ""}) is None
    # ranks held to fewer CPUs than the host has (an emulated node's set, a binding) share those
    held = json.dumps({"vm": {"logical_cpus": 2, "cpus_allowed": 1}})
    assert prediction.node_cpus({"hardware": held, "ranks_per_node": 1}) == 1
    assert prediction.node_cpus({"hardware": held, "ranks_per_node": 2}) == 2  # bound: one each
    free = json.dumps({"vm": {"logical_cpus": 2, "cpus_allowed": 2}})
    assert prediction.node_cpus({"hardware": free, "ranks_per_node": 2}) == 2
    assert model.shared_rate(1, 1, prediction.node_cpus({"hardware": held, "ranks_per_node": 1}), 0.9) == (
        pytest.approx(1 / 1.9)
    )
    assert model.shared_rate(1, 1, prediction.node_cpus({"hardware": free, "ranks_per_node": 1}), 0.9) == 1


def test_a_calibration_measures_each_trial_in_a_launch_of_the_copies_in_alternating_order(tmp_path):
    conf = tiny_config(tmp_path, classes=10, iterations=5)
    run = tiny_run(framework="torch", ranks_per_node=2)
    out = tmp_path / "calibration.jsonl"
    conf["contention"] = {"trials": 2}
    calibration.calibrate(conf, run, env_record("torch"), out, tmp_path / "copies")
    lines = [json.loads(ln) for ln in out.read_text().splitlines()]
    assert [ln["first"] for ln in lines] == ["alone", "together"] and all("failure" not in ln for ln in lines)
    assert all(ln["alone_s"] > 0 and ln["together_max_s"] >= ln["together_s"] > 0 for ln in lines)
    # each trial two copies, each a whole 1-rank run with its own records and status
    sessions = set()
    for trial, kinds in ((0, ["alone", "together"]), (1, ["together", "alone"])):
        measured = {}
        for copy in (0, 1):
            folder = tmp_path / "copies" / f"trial{trial}" / f"copy{copy}"
            status = json.loads((folder / "status.json").read_text())
            assert status["status"] == "ok" and (status["nodes"], status["ranks_per_node"]) == (1, 1)
            # each copy's mpirun has a session directory of its own (launchers.apart): two made at
            # once in the node's shared one failed a copy here ("File exists")
            sessions.add(status["argv"][status["argv"].index("orte_tmpdir_base") + 1])
            records = [json.loads(ln) for ln in (folder / "rank0.jsonl").read_text().splitlines()]
            steps = [r for r in records if r["kind"] == "step" and not r["warmup"]]
            assert [r["iteration"] for r in steps] == list(range(conf["warmup"], conf["warmup"] + len(steps)))
            measured[copy] = [(r["segment"], r["segment_kind"]) for r in steps]
        # copy 0 measures both segments, copy 1 only the together one, the study's iterations each
        together_ = kinds.index("together")
        assert sorted(set(measured[0])) == [(0, kinds[0]), (1, kinds[1])]
        assert set(measured[1]) == {(together_, "together")} and len(measured[1]) == 5
        assert measured[0].count((together_, "together")) == 5
        # they met before both segments, and marked each measured
        meeting = tmp_path / "copies" / f"trial{trial}" / "meet"
        for segment in (0, 1):
            assert sorted(p.name for p in (meeting / f"segment{segment}" / "start").iterdir()) == ["copy0", "copy1"]
        assert sorted(p.name for p in (meeting / f"segment{together_}" / "done").iterdir()) == ["copy0", "copy1"]
        assert sorted(p.name for p in (meeting / f"segment{1 - together_}" / "done").iterdir()) == ["copy0"]
    assert len(sessions) == 4
    identity = {**IDENTITY, "batch_size": run["batch_size"]}
    row = contention.table([(identity, 2, out)]).iloc[0]
    assert row["trials"] == 2 and row["slowdown"] > 0 and row["failure"] == ""


class _Stepper:
    """A trainer's native step API, counting steps."""

    def __init__(self):
        self.steps = 0

    def step(self, fetch):
        fetch()
        self.steps += 1
        time.sleep(0.001)

    def queued(self, loss):
        return loss

    def finish(self, handle):
        return 0.0


def _copy(folder, index, segments=("together",)):
    return {"dir": str(folder), "count": 2, "copy": index, "segments": list(segments)}


def test_the_plan_alternates_which_kind_goes_first():
    assert together.plan(1) == ["alone", "together"]
    assert together.plan(3) == ["alone", "together", "together", "alone", "alone", "together"]


def test_copies_meet_before_a_segment_and_the_first_done_keeps_stepping_until_all_are(tmp_path, monkeypatch):
    """Two copies in threads: the first to arrive waits for the second; the first to finish measuring
    steps on, unrecorded, until the second has; in an alone segment the other copy waits without
    stepping until copy 0 has measured; a copy whose partner never comes stops with an error."""
    arrived = {}

    def copy(index, delay):
        time.sleep(delay)
        together.Segment(_copy(tmp_path / "meet", index), 0, tmp_path / f"copy{index}").meet()
        arrived[index] = time.monotonic()

    threads = [threading.Thread(target=copy, args=(i, d)) for i, d in ((0, 0.0), (1, 0.3))]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert abs(arrived[0] - arrived[1]) < 0.1  # copy0 waited the 0.3 s for copy1
    fast = _Stepper()
    first = together.Segment(_copy(tmp_path / "meet", 0), 0, tmp_path / "copy0")
    keeping = threading.Thread(target=first.keep_company, args=(fast, lambda it: it, 5))
    keeping.start()
    time.sleep(0.2)
    assert keeping.is_alive() and fast.steps > 0  # copy1 still measuring: copy0 keeps the node busy
    last = together.Segment(_copy(tmp_path / "meet", 1), 0, tmp_path / "copy1")
    assert last.keep_company(_Stepper(), lambda it: it, 5) == 0  # the last one
    keeping.join(timeout=5)
    assert not keeping.is_alive()
    # alone: copy 1 measures nothing and waits, idle, until copy 0 marks the segment measured
    idle = together.Segment(_copy(tmp_path / "alone", 1, ["alone"]), 0, tmp_path / "copy1")
    alone = together.Segment(_copy(tmp_path / "alone", 0, ["alone"]), 0, tmp_path / "copy0")
    assert alone.measures and not idle.measures
    waiting = threading.Thread(target=idle.wait)
    waiting.start()
    time.sleep(0.1)
    assert waiting.is_alive()
    assert alone.keep_company(_Stepper(), None, 5) == 0  # an alone segment: marked, no company kept
    waiting.join(timeout=5)
    assert not waiting.is_alive()
    # a copy that failed ends the others' waits at once, saying which and why
    together.abandon(tmp_path / "gone", "copy 1: mpirun exited with code 1")
    with pytest.raises(RuntimeError, match=r"another copy failed \(copy 1: mpirun exited"):
        together.Segment(_copy(tmp_path / "gone", 0), 0, tmp_path / "copy0").meet()
    monkeypatch.setattr(together, "MEET_TIMEOUT_S", 0.05)
    with pytest.raises(RuntimeError, match="2 copies never all reached"):
        together.Segment(_copy(tmp_path / "never", 0), 0, tmp_path / "copy0").meet()


def test_a_calibration_whose_copies_fail_says_why_in_its_output(tmp_path):
    conf = tiny_config(tmp_path)
    run = tiny_run(framework="mxnet", layout="NHWC", ranks_per_node=2)  # MXNet's CPU convolutions are NCHW
    out = tmp_path / "calibration.jsonl"
    conf["contention"] = {"trials": 2}
    calibration.calibrate(conf, run, env_record("mxnet"), out, tmp_path / "copies")
    lines = [json.loads(ln) for ln in out.read_text().splitlines()]
    assert len(lines) == 1 and lines[0]["failure"].startswith("copy 0 of 2 failed:")
    assert "layout NHWC" in lines[0]["failure"]
