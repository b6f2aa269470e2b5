"""Performance model and Horovod timeline parsing, on numbers worked out by hand."""

import json
import re

import pandas as pd
import pytest

from dlscale.analysis import model, prediction
from dlscale.core import timeline
from dlscale.core.ring import ring_time
from dlscale.core.vocabulary import CYCLE_TIME_S, FUSION_THRESHOLD_BYTES

BASE = {"io_s": 0.001, "h2d_s": 0.0, "forward_s": 0.1, "backward_s": 0.2, "update_s": 0.01}
COMPUTE = 0.311


def linear(seconds_per_byte, latency=0.0):
    return lambda m: latency + m * seconds_per_byte


def test_fusion_buffers_fill_up_to_threshold_in_order():
    assert model.fusion_buffers([50, 50, 50], threshold=120) == [(100, 2), (50, 1)]
    assert model.fusion_buffers([200, 10, 10], threshold=120) == [(200, 1), (20, 2)]  # too big: alone
    assert model.fusion_buffers([], threshold=120) == []


def test_each_tensor_beyond_the_sweeps_adds_the_per_tensor_cost():
    cost = linear(1e-4)  # the sweep's T(m), measured with FUSED_PIECES (4) tensors per message
    sizes = [10] * 10  # 100 bytes in 10 tensors, one fused buffer
    plain = model.predict(BASE, model.Gradients(sizes, threshold=10**9), 2, cost)
    costly = model.predict(BASE, model.Gradients(sizes, threshold=10**9), 2, model.Cost(cost, per_tensor=0.002))
    assert plain["comm_total_s"] == pytest.approx(0.01)
    assert costly["comm_total_s"] == pytest.approx(0.01 + 6 * 0.002)
    assert costly["iteration_s"] == pytest.approx(COMPUTE + 0.022)
    # two buffers of one tensor each: each 3 tensors under the sweep's 4
    _, busy = model.schedule([0.0, 0.0], [60, 60], cost, threshold=100, per_tensor=0.001)
    assert busy == pytest.approx(2 * (0.006 - 3 * 0.001))


def test_a_lone_tensor_costs_the_one_tensor_path_from_its_smallest_size():
    # Horovod reduces a buffer of one tensor in place: the sweep's horovod_one path times it
    cost = model.Cost(linear(1e-4), per_tensor=0.001, alone=linear(4e-5), alone_from=150)
    assert cost(200, 1) == pytest.approx(0.008)  # alone: no fusion-buffer copies
    assert cost(100, 1) == pytest.approx(0.01 - 3 * 0.001)  # under the path's smallest size: fused less 3 tensors
    assert cost(200, 2) == pytest.approx(0.02 - 2 * 0.001)  # two tensors fuse: the fused path
    assert cost(200) == pytest.approx(0.02)  # the sweep's own message: FUSED_PIECES tensors
    # the schedule uses it: AlexNet's largest gradient over the threshold goes alone
    _, busy = model.schedule([0.0, 0.0, 0.0], [200, 30, 30], cost, threshold=100)
    assert busy == pytest.approx(0.008 + (0.006 - 2 * 0.001))
    # a plain T(m) with per_tensor still works (the ring model of stated links)
    _, plain = model.schedule([0.0, 0.0, 0.0], [200, 30, 30], linear(1e-4), threshold=100, per_tensor=0.001)
    assert plain == pytest.approx(0.02 - 3 * 0.001 + 0.006 - 2 * 0.001)


def _baseline(sizes, ready, backward):
    return {
        "sizes": sizes,
        "ready": ready,
        "base": {"backward_s": backward},
        "ready_from": (prediction.READY_MEASURED if ready else prediction.READY_AFTER),
    }


def _key(framework, model_name="alexnet", threads=1):
    values = {k: None for k in prediction.MATCH}
    values.update(framework=framework, model=model_name, threads_per_rank=threads)
    return tuple(values[k] for k in prediction.MATCH)


def test_a_framework_that_overlaps_without_ready_times_borrows_them_by_fraction_of_backward():
    torch = _baseline([10, 20, 10], [0.3, 0.2, 0.1], backward=0.4)
    out = {
        _key("torch"): torch,
        _key("tensorflow"): _baseline([20, 10, 10], None, backward=0.8),  # its own order of parameters
        _key("mxnet"): _baseline([10, 10, 30], None, backward=0.8),  # not the same network
        _key("jax", threads=2): _baseline([10, 20, 10], None, backward=0.8),  # not the same threads
    }
    for key in list(out)[1:]:
        prediction._borrow_ready(out, key)
    tf = out[_key("tensorflow")]
    # 20 bytes: torch's 0.2 of 0.4; the first 10 takes torch's first 10 (0.3 of 0.4), the second its second
    assert tf["ready"] == pytest.approx([0.4, 0.6, 0.2])
    assert tf["ready_from"] == prediction.READY_BORROWED.format("torch")
    assert out[_key("mxnet")]["ready"] is None and out[_key("mxnet")]["ready_from"] == prediction.READY_AFTER
    assert out[_key("jax", threads=2)]["ready"] is None
    assert torch["ready"] == [0.3, 0.2, 0.1] and torch["ready_from"] == prediction.READY_MEASURED


def _one_rank_run(framework, backward, comm_overlaps_backward=True):
    """A 1-rank native run's row: traced phases adding up to 0.5 s, its measured iteration 0.25 s."""
    row = {"framework": framework, "model": "alexnet", "allreduce_schedule": "overlap", "allreduce_library": "horovod"}
    row |= {"layout": "best", "timing": "native", "batch_size": 8, "loader_workers": 1, "image_size": 64}
    row |= {"classes": 1000, "threads_per_rank": 1, "precision": "fp32"}
    row |= {"nodes": 1, "ranks_per_node": 1, "ranks": 1, "repeat": 0, "iteration_s": 0.25, "comm_s": 0.0}
    row |= {"io_s": 0.0, "h2d_s": 0.0, "forward_s": 0.5 - backward, "backward_s": backward, "update_s": 0.0}
    return row | {"comm_overlaps_backward": comm_overlaps_backward}


def test_ready_times_are_placed_on_the_baselines_backward_as_fractions_of_the_last():
    # The ready times come from untraced iterations (the last gradient at 0.1 s), the phases from traced ones
    # scaled to the measured iteration (backward 0.4 s of 0.5 traced -> 0.2 of 0.25): the seconds of the one are
    # not the seconds of the other. Left as seconds, every gradient would look ready by half of backward.
    table = pd.DataFrame([_one_rank_run("torch", 0.4), _one_rank_run("tensorflow", 0.4)])
    gradients = [(8, 0.1), (4, 0.025), (16, 0.05)]  # (bytes, s after backward's start)
    tensors = pd.DataFrame(
        [
            {**{k: run[k] for k in prediction.RUN_KEYS}, "tensor": i, "bytes": b, "ready_s": r if n == 0 else None}
            for n, run in table.iterrows()
            for i, (b, r) in enumerate(gradients)
        ]
    )
    bases, unusable = prediction.baselines(table, tensors)
    torch, tf = (bases[tuple(table.iloc[i][k] for k in prediction.MATCH)] for i in (0, 1))
    assert not unusable and torch["base"]["backward_s"] == pytest.approx(0.2)
    assert torch["ready"] == pytest.approx([0.2, 0.05, 0.1]) and torch["ready_from"] == prediction.READY_MEASURED
    # borrowed by the same fractions: tensorflow's last gradient is ready as its backward ends, too
    assert tf["ready"] == pytest.approx([0.2, 0.05, 0.1]) and tf["ready_from"] == prediction.READY_BORROWED.format(
        "torch"
    )
    assert model.on_backward([0.0, 0.0], 0.2) is None and model.on_backward(None, 0.2) is None


def test_sequential_exposes_all_communication():
    sizes = [100, 200, 300]
    p = model.predict(BASE, model.Gradients(sizes, threshold=10**9), 2, linear(1e-4))
    assert p["comm_total_s"] == pytest.approx(0.06)  # one fused buffer of 600 bytes
    assert p["comm_exposed_s"] == pytest.approx(0.06)
    assert p["iteration_s"] == pytest.approx(COMPUTE + 0.06)


def test_overlap_hides_communication_behind_backward():
    sizes = [100, 100, 100]  # each allreduce takes 0.01 s
    cost = linear(1e-4)
    early = model.predict(BASE, model.Gradients(sizes, [0.02, 0.05, 0.10], threshold=100), 2, cost)
    assert early["comm_total_s"] == pytest.approx(0.03)
    assert early["comm_exposed_s"] == pytest.approx(0.0)  # all done long before backward ends
    late = model.predict(BASE, model.Gradients(sizes, [0.02, 0.05, 0.195], threshold=100), 2, cost)
    # the last gradient is picked up at the next 1 ms cycle (0.195 s) and takes 0.01 s
    assert late["comm_exposed_s"] == pytest.approx(0.005, abs=1e-9)
    assert late["iteration_s"] == pytest.approx(COMPUTE + 0.005)


def test_gradients_ready_in_one_cycle_are_fused():
    sizes = [100, 100]
    cost = linear(1e-4, latency=0.05)  # a big per-message cost makes fusion visible
    _, fused_busy = model.schedule([0.0002, 0.0008], sizes, cost, threshold=1000, cycle=1e-3)
    _, apart_busy = model.schedule([0.0002, 0.0015], sizes, cost, threshold=1000, cycle=1e-3)
    assert fused_busy == pytest.approx(0.05 + 0.02)  # cycle at 1 ms takes both: one message
    assert apart_busy == pytest.approx(2 * 0.05 + 0.02)


def test_one_rank_is_compute_only():
    p = model.predict(BASE, model.Gradients([10**6]), 1, linear(1.0))
    assert p == {"iteration_s": pytest.approx(COMPUTE), "comm_total_s": 0.0, "comm_exposed_s": 0.0}


def test_sweep_cost_interpolates_and_extends():
    cost = model.sweep_cost([4, 1024, 4096], [1e-5, 2e-5, 5e-5])
    assert cost(4) == pytest.approx(1e-5) and cost(1024) == pytest.approx(2e-5)
    assert cost(2560) == pytest.approx(3.5e-5)
    assert cost(8192) == pytest.approx(5e-5 + 4096 * (3e-5 / 3072))
    assert cost(1) == pytest.approx(1e-5)
    with pytest.raises(ValueError, match="two sizes"):
        model.sweep_cost([4], [1e-5])


def test_ring_cost_matches_the_allreduce_module():
    assert model.ring_cost(8, 2e-6, 1e-9)(1 << 20) == ring_time(1 << 20, 8, 2e-6, 1e-9)


def _timeline(path, events):
    """A timeline in Horovod 0.28's chrome-trace format (metadata, then B/E events per tensor)."""
    out = [{"name": "process_name", "ph": "M", "pid": 0, "args": {"start_time_since_epoch_in_micros": 1}}]
    for pid, name, start, end, inner in events:
        out.append({"name": "process_name", "ph": "M", "pid": pid, "args": {"name": f"allreduce.{pid}"}})
        out.append({"ph": "B", "name": "NEGOTIATE_ALLREDUCE", "ts": start - 500, "pid": pid})
        out.append({"ph": "E", "ts": start - 100, "pid": pid})
        out.append({"ph": "B", "name": name, "ts": start, "pid": pid})
        for act, a, b in inner:
            out += [{"ph": "B", "name": act, "ts": a, "pid": pid}, {"ph": "E", "ts": b, "pid": pid}]
        out.append({"ph": "E", "ts": end, "pid": pid})
    path.write_text(json.dumps(out))


def test_timeline_comm_counts_fused_operations_not_tensors(tmp_path):
    """Horovod stamps each tensor of a fused operation apart (microseconds after each other), all
    started before the operation runs and ended after it."""
    path = tmp_path / "timeline.json"
    _timeline(
        path,
        [
            (1, "ALLREDUCE", 1000, 3000, [("MPI_ALLREDUCE", 1100, 2900)]),  # one operation, fused with pid 2
            (2, "ALLREDUCE", 1004, 3001, [("MPI_ALLREDUCE", 1104, 2901)]),
            (3, "ALLREDUCE", 3500, 4000, []),  # the next operation
            (4, "ALLREDUCE", 10000, 11000, []),  # second iteration
        ],
    )
    seconds, ops = timeline.timeline_comm(path, iterations=2)
    assert seconds == pytest.approx((2001 + 500 + 1000) / 1e6 / 2)
    assert ops == pytest.approx(3 / 2)  # three operations (four tensors) over two iterations


def test_extrapolation_falls_with_ranks_and_rises_with_bandwidth():
    bases = {
        ("torch", "alexnet", "overlap", "best", "native", 8, 64, 1000, 1, "fp32"): {
            "base": BASE,
            "sizes": [4 * 10**6] * 10,
            "ready": [0.02 * i for i in range(10)],
            "threshold": FUSION_THRESHOLD_BYTES,
            "cycle": CYCLE_TIME_S,
        }
    }
    links = {"slow": {"gbit_s": 1, "latency_us": 50}, "fast": {"gbit_s": 100, "latency_us": 1}}
    table = prediction.extrapolate(bases, links, max_ranks=64)
    assert sorted(set(table["ranks"])) == [2, 4, 8, 16, 32, 64]
    for _, g in table.groupby("link"):
        eff = g.sort_values("ranks")["predicted_efficiency"].tolist()
        assert all(a >= b for a, b in zip(eff, eff[1:])) and 0 < eff[-1] <= 1
    slow = table[table["link"] == "slow"].set_index("ranks")["predicted_efficiency"]
    fast = table[table["link"] == "fast"].set_index("ranks")["predicted_efficiency"]
    assert (fast > slow).all()
    assert slow[64] < 0.5  # 40 MB over 1 Gbit/s cannot hide behind a 0.2 s backward


def test_off_target_configurations_say_which_part_of_the_error_is_larger():
    import pandas as pd

    def row(framework, repeat, iteration, exposed, predicted, predicted_exposed):
        compute, comm = model.error_parts(predicted, predicted_exposed, iteration, exposed)
        return {
            "framework": framework,
            "repeat": repeat,
            "iteration_s": iteration,
            "comm_exposed_s": exposed,
            "predicted_iteration_s": predicted,
            "predicted_comm_exposed_s": predicted_exposed,
            "error_iteration": (predicted - iteration) / iteration,
            "error_from_compute": compute,
            "error_from_exposed": comm,
        }

    table = pd.DataFrame(
        [
            row("torch", 0, 1.0, 0.2, 0.98, 0.2),
            row("torch", 1, 1.0, 0.2, 1.03, 0.2),  # within 5%
            row("mxnet", 0, 1.0, 0.2, 0.75, 0.15),
            row("mxnet", 1, 1.2, 0.2, 0.75, 0.15),  # compute ran slower
            row("tensorflow", 0, 2.0, 1.5, 1.2, 0.7),  # waited longer for allreduces than predicted
        ]
    )
    assert model.error_parts(0.75, 0.15, 1.0, 0.2) == pytest.approx((-0.2, -0.05))
    far = prediction.off_target(table, ["framework"])
    assert [x["framework"] for x in far] == ["mxnet", "tensorflow"]
    assert far[0]["runs"] == 2 and far[0]["error_iteration"] == pytest.approx((-0.25 - 0.375) / 2, abs=1e-4)
    assert far[0]["reason"].startswith("compute (-")
    assert (
        far[0]["reason"]
        .split(";")[0]
        .endswith(
            "0.9 s of compute per iteration measured, 0.6 s predicted (the 1-rank run's compute x the slowdown of its "
            "ranks per node, 1)"
        )
    )
    # two runs, 1.0 and 1.2 s: the error's interval from their spread reaches within 5%
    assert far[0]["error_ci_lo"] < -0.05 < far[0]["error_ci_hi"] and far[0]["beyond_noise"] is False
    assert re.search(r"; its 95% interval, -\d+\.\d% to \+\d+\.\d%, reaches within 5%$", far[0]["reason"])
    # one run: no interval, and nothing said of the noise
    assert far[1]["reason"] == (
        "exposed communication (-40.0% of the iteration): 1.5 s per iteration measured, 0.7 s predicted"
    )
    assert far[1]["error_ci_lo"] is None and far[1]["beyond_noise"] is None
    # three runs whose slowest iteration is not the one that waited longest: the measured compute is the
    # runs' median compute (0.538 s), as the error parts are medians over runs, not 0.625 - 0.195 s
    runs = [(0.887, 0.195), (0.625, 0.087), (0.599, 0.216)]
    three = pd.DataFrame([row("mxnet", i, it, ex, 0.527, 0.115) for i, (it, ex) in enumerate(runs)])
    [one] = prediction.off_target(three, ["framework"])
    assert one["error_from_compute"] == pytest.approx((0.412 - 0.538) / 0.625, abs=1e-3)
    assert "0.538 s of compute per iteration measured, 0.412 s predicted" in one["reason"]


def _runs(iterations, predicted, ranks=2, exposed=0.1):
    """Model-table rows of one configuration (a torch baseline key), one per measured iteration time."""
    import pandas as pd

    key = {k: 0 for k in prediction.MATCH}
    return pd.DataFrame(
        [
            {
                **key,
                "ranks": ranks,
                "iteration_s": it,
                "predicted_iteration_s": predicted,
                "predicted_comm_exposed_s": exposed,
                "error_iteration": (predicted - it) / it,
            }
            for it in iterations
        ]
    )


def test_the_model_errors_interval_is_the_runs_spread_and_the_baselines():
    """error_interval: zero width where every run took the same time, centred on the median error,
    wider with the runs' spread and wider again with the 1-rank baseline's; Student-t with
    Welch-Satterthwaite's degrees of freedom on the log scale, checked by hand for two equal parts."""
    import math

    assert prediction.error_interval(_runs([1.0, 1.0, 1.0], 1.2)) == pytest.approx((0.2, 0.2))
    assert all(math.isnan(x) for x in prediction.error_interval(_runs([1.0], 1.2)))
    runs = _runs([0.9, 1.0, 1.1], 1.2)
    lo, hi = prediction.error_interval(runs)
    assert lo < runs["error_iteration"].median() < hi
    wider = prediction.error_interval(_runs([0.8, 1.0, 1.2], 1.2))
    assert wider[0] < lo and wider[1] > hi
    # a baseline as spread as the runs, the prediction all compute (exposed 0): twice the variance,
    # and twice the degrees of freedom (2 + 2)
    base = _runs([0.9, 1.0, 1.1], math.nan, ranks=1).drop(columns=["predicted_iteration_s"])
    both = prediction.error_interval(runs.assign(predicted_comm_exposed_s=0.0), base)
    x = [math.log(t) for t in (0.9, 1.0, 1.1)]
    se = math.sqrt(2 * (sum((v - sum(x) / 3) ** 2 for v in x) / 2) / 3)
    half = prediction.student.quantile(0.975, 4) * se
    centre = 1 + runs["error_iteration"].median()
    assert both == pytest.approx((centre * math.exp(-half) - 1, centre * math.exp(half) - 1))
    # far off with little spread: beyond the 5% band, said so
    [far] = prediction.off_target(
        _runs([1.0, 1.01, 0.99], 1.3).assign(error_from_compute=0.3, error_from_exposed=0.0, comm_exposed_s=0.1),
        ["framework"],
    )
    assert far["beyond_noise"] is True and far["reason"].endswith("lies beyond 5%")


@pytest.mark.timeout(10)
@pytest.mark.parametrize(
    "ready, sizes, cost, problem",
    [
        ([float("nan")], [100], linear(1e-4), "ready time nan"),  # a native run without traces: no backward time
        ([0.1, float("inf")], [100, 100], linear(1e-4), "ready time inf"),
        ([0.1], [100], lambda m: float("nan"), "an allreduce of 100 bytes costs nan s"),
    ],
)
def test_schedule_refuses_what_is_not_a_number_instead_of_hanging(ready, sizes, cost, problem):
    with pytest.raises(ValueError, match=f"cannot schedule allreduces: {problem}"):
        model.schedule(ready, sizes, cost)


def test_model_error_is_split_by_communication_library():
    """model_error.json's medians per library, over the predicted runs of each."""
    from dlscale.analysis import prediction

    rows = [
        {"allreduce_library": lib, "ranks": 2, "error_iteration": e, "error_comm_total": 2 * e, "not_predicted": ""}
        for lib, errors in (("horovod", [0.1, -0.3, 0.2]), ("native", [-0.05, 0.01]))
        for e in errors
    ]
    rows.append({"allreduce_library": "native", "ranks": 2, "error_iteration": None, "not_predicted": "no sweep"})
    for k in prediction.MATCH + ["nodes", "ranks_per_node"]:
        for r in rows:
            r.setdefault(k, 1 if k in ("nodes", "ranks_per_node") else "x")
    error = prediction.model_error(pd.DataFrame(rows).reindex(columns=prediction.COLUMNS))
    assert error["by_library"] == {
        "horovod": {
            "runs": 3,
            "median_abs_error_iteration": pytest.approx(0.2),
            "median_abs_error_comm_total": pytest.approx(0.4),
        },
        "native": {
            "runs": 2,
            "median_abs_error_iteration": pytest.approx(0.03),
            "median_abs_error_comm_total": pytest.approx(0.06),
        },
    }


def test_extrapolation_figure_says_its_error_where_the_study_replayed():
    from dlscale.analysis import figures

    replays = pd.DataFrame({"nodes": [4, 8, 16, 16], "error_extrapolated": [0.004, -0.014, -0.052, 0.01]})
    said = figures._checked(replays)
    assert "+0.4% at 4 nodes" in said and "-1.4% at 8 nodes" in said and "-5.2% at 16 nodes" in said
    assert figures._checked(None) == "" and figures._checked(replays.assign(error_extrapolated=float("nan"))) == ""


def test_the_extrapolations_band_is_the_models_median_error_on_the_studys_runs():
    ext = pd.DataFrame(
        {"framework": ["torch", "torch", "jax"], "model": ["alexnet"] * 3, "link": ["a"] * 3, "ranks": [2, 4, 2]}
    ).assign(predicted_efficiency=[0.9, 0.8, 0.5])
    table = pd.DataFrame(
        {"framework": ["torch"] * 3, "model": ["alexnet"] * 3, "error_iteration": [0.1, -0.3, float("nan")]}
    )
    banded = prediction.error_band(ext, table)
    torch_rows = banded[banded["framework"] == "torch"]
    assert torch_rows["model_error"].tolist() == pytest.approx([0.2, 0.2])  # median of |0.1|, |-0.3|
    assert torch_rows["predicted_efficiency_lo"].tolist() == pytest.approx([0.72, 0.64])
    assert torch_rows["predicted_efficiency_hi"].tolist() == pytest.approx([1.08, 0.96])
    assert banded.loc[banded["framework"] == "jax", "model_error"].isna().all()  # no predicted run: no band


def test_the_extrapolations_band_widens_by_its_inputs_interval():
    """The 1-rank runs' interval (their mean iteration +-10%) moves the efficiency both ways (a faster
    rank hides less communication); the band is that interval widened by the model's error."""
    base = {"base": BASE, "sizes": [4 * 10**6] * 10, "ready": [0.02 * i for i in range(10)]}
    base.update(threshold=FUSION_THRESHOLD_BYTES, cycle=CYCLE_TIME_S)
    key = ("torch", "alexnet", "overlap", "best", "native", 8, 64, 1000, 1, "fp32")
    links = {"slow": {"gbit_s": 1, "latency_us": 50}}
    bare = prediction.extrapolate({key: base}, links, max_ranks=16)
    assert bare[["input_efficiency_lo", "input_efficiency_hi"]].isna().all().all()  # one 1-rank run: no interval
    ext = prediction.extrapolate({key: {**base, "input_spread": 0.1}}, links, max_ranks=16)
    assert ext["predicted_efficiency"].tolist() == pytest.approx(bare["predicted_efficiency"].tolist())
    assert (ext["input_efficiency_lo"] < ext["predicted_efficiency"]).all()
    assert (ext["predicted_efficiency"] < ext["input_efficiency_hi"]).all()
    # a band always holds its own point, where whole cycles make the efficiency step the other way too
    for row in prediction.extrapolate({key: {**base, "input_spread": 0.001}}, links, max_ranks=16).itertuples():
        assert row.input_efficiency_lo <= row.predicted_efficiency <= row.input_efficiency_hi
    table = pd.DataFrame({"framework": ["torch"], "model": ["alexnet"], "error_iteration": [0.2]})
    banded = prediction.error_band(ext, table)
    assert banded["predicted_efficiency_lo"].tolist() == pytest.approx((ext["input_efficiency_lo"] * 0.8).tolist())
    assert banded["predicted_efficiency_hi"].tolist() == pytest.approx((ext["input_efficiency_hi"] * 1.2).tolist())
    spread = prediction._relative_halfwidth(pd.Series([1.0, 1.1, 0.9]))
    assert spread == pytest.approx(4.303 * 0.1 / 3**0.5 / 1.0, rel=1e-3)  # t(0.975, 2) x sd / sqrt(n) / mean


def test_a_baseline_borrows_only_where_every_run_recorded_the_overlap_as_true():
    def group(*flags):
        return pd.DataFrame({"comm_overlaps_backward": pd.Series(flags, dtype=object)})

    assert prediction._overlaps(group(True, True)) and prediction._overlaps(group("True", "true"))
    assert not prediction._overlaps(group(True, False)) and not prediction._overlaps(group("False"))
    assert not prediction._overlaps(group(float("nan"), True))  # a run that did not say: not borrowed
    assert not prediction._overlaps(pd.DataFrame({"iteration_s": [1.0]}))  # runs from before the column


def test_the_slowdowns_calibration_widens_the_errors_interval_as_its_own_interval_says():
    """slowdown_spreads reads back the variance of the log slowdown that contention.csv's interval was
    made from; with_error_intervals puts each configuration's interval on its rows, wider with it."""
    import math

    import numpy as np
    import pandas as pd

    from dlscale.analysis import contention

    key = {k: 0 for k in prediction.MATCH}
    ratios = [1.1, 1.3, 1.2]
    lines = [{"alone_s": 1.0, "together_s": r} for r in ratios]
    calibrations = pd.DataFrame([contention.row(key, 2, lines)])
    [(var, trials)] = prediction.slowdown_spreads(calibrations).values()
    assert trials == 3 and var == pytest.approx(np.var(np.log(ratios), ddof=1) / 3)
    runs = pd.concat([_runs([0.9, 1.0, 1.1], math.nan, ranks=1), _runs([1.0, 1.05, 0.95], 1.2)], ignore_index=True)
    runs = runs.assign(nodes=1, ranks_per_node=runs["ranks"])
    runs.loc[runs["ranks"] == 1, "error_iteration"] = math.nan
    plain = prediction.with_error_intervals(runs)
    wider = prediction.with_error_intervals(runs, prediction.slowdown_spreads(calibrations))
    assert plain["error_ci_lo"].isna().sum() == 3  # the baseline's rows have none
    lo, hi = plain.dropna(subset=["error_ci_lo"]).iloc[0][["error_ci_lo", "error_ci_hi"]]
    wlo, whi = wider.dropna(subset=["error_ci_lo"]).iloc[0][["error_ci_lo", "error_ci_hi"]]
    assert wlo < lo < 0.2 < hi < whi
    assert (lo, hi) == pytest.approx(prediction.error_interval(runs[runs["ranks"] == 2], runs[runs["ranks"] == 1]))
