"""Where a run's time goes (dlscale/analysis/cost.py) and the study's progress line
(dlscale/runtime/progress.py), on run folders written here; a real study's are checked by
tests/test_second_pass.py."""

import json
import types

import pytest
from hypothesis import given
from hypothesis import strategies as st

from dlscale.analysis.cost import AFTER, STARTUP, CostError, run_cost
from dlscale.core import paths
from dlscale.core.records import SCHEMA, utc_epoch, utc_stamp
from dlscale.core.vocabulary import STATUS, records_name
from dlscale.runtime import progress
from dlscale.workloads.trainer import Trainer
from tests.conftest import tiny_run

BEGAN = 1_800_000_000.0


def _status(run, elapsed_s=10.0, status="ok"):
    started = "2027-01-15T08:00:00.000Z"  # BEGAN in UTC
    return {**run, "status": status, "elapsed_s": elapsed_s, "started": started}


def _write_run(folder, gaps, stamped=True, ranks=1, finished=True):
    """A run folder whose points follow each other `gaps` seconds apart (launch, interpreter, import,
    build, data, warm-up, timed, profiled, teardown: nine gaps; the first five as one where not stamped)."""
    folder.mkdir(parents=True)
    points = [BEGAN]
    for gap in gaps:
        points.append(points[-1] + gap)
    startup = dict(zip(("process", "harness", "imported", "built"), points[1:5])) if stamped else None
    rest = points[5:] if stamped else points[1:]
    run_at, warm_at, timed_at, end_at, _ = rest
    for rank in range(ranks):
        lines = [{"kind": "run", "time": run_at, **({"startup": startup} if startup else {})}]
        lines += [{"kind": "step", "time": warm_at, "warmup": True, "profiled": False}]
        lines += [{"kind": "step", "time": timed_at, "warmup": False, "profiled": False}]
        lines += [{"kind": "end", "time": end_at, "compile": {"step": {"s": 0.5, "cache": "miss"}}}] if finished else []
        text = "".join(json.dumps(_complete(line, rank)) + "\n" for line in lines)
        (folder / records_name(rank)).write_text(text)
    (folder / STATUS).write_text(json.dumps(_status(tiny_run(), elapsed_s=points[-1] - BEGAN)))
    return folder


def _complete(line, rank):
    """A record with every field its kind requires (dlscale/core/records.py)."""
    filler = {"run": {**tiny_run(), "image_size": 8, "classes": 2, "precision": "fp32", "size": 1, "local_rank": 0}}
    filler["run"] |= {"host": "h", "provenance": {}}
    filler["step"] = {"iteration": 0, "wall_s": 0.1, "loss": 1.0}
    filler["end"] = {"iterations": 2, "checksum": 0.0, "elapsed_s": 1.0}
    return {"schema": SCHEMA, "rank": rank, **filler[line["kind"]], **line}


@given(st.lists(st.floats(0.0, 100.0), min_size=9, max_size=9))
def test_the_parts_of_a_stamped_run_are_its_gaps_and_sum_to_its_elapsed_time(tmp_path_factory, gaps):
    cost = run_cost(_write_run(tmp_path_factory.mktemp("c") / "run", gaps))
    assert [cost[p] for p in (*STARTUP, *AFTER)] == pytest.approx(gaps, abs=1e-6)
    assert cost["start"] == pytest.approx(sum(gaps[:5]), abs=1e-6)
    assert sum(cost[p] for p in ("start", *AFTER)) == pytest.approx(cost["elapsed"], abs=1e-6)
    assert cost["compile"] == 0.5


@given(st.floats(0.0, 4e9))
def test_a_status_time_reads_back_to_the_millisecond(epoch):
    assert utc_epoch(utc_stamp(epoch)) == pytest.approx(epoch, abs=1e-3)


def test_a_run_recorded_before_the_stamps_has_its_start_only(tmp_path):
    cost = run_cost(_write_run(tmp_path / "run", [4.0, 1.0, 2.0, 0.5, 0.25], stamped=False))
    assert (cost["start"], cost["warmup"], cost["teardown"]) == (4.0, 1.0, 0.25)
    assert not set(STARTUP) & set(cost)


def test_an_unfinished_rank_is_an_error_naming_its_file(tmp_path):
    with pytest.raises(CostError, match="rank0.jsonl: the rank did not finish"):
        run_cost(_write_run(tmp_path / "run", [1.0] * 9, finished=False))


def _done(run, elapsed_s):
    return _status(run, elapsed_s)


def test_a_run_is_predicted_by_its_configuration_then_its_framework_and_ranks_then_every_run():
    torch0, torch_other = tiny_run(repeat=0), tiny_run(repeat=0, model="alexnet")
    mxnet = tiny_run(framework="mxnet")
    done = [_done(torch0, 10.0), _done({**torch0, "repeat": 1}, 20.0), _done(torch_other, 40.0)]
    assert progress.predicted_s(done, [{**torch0, "repeat": 2}]) == 15.0  # the same configuration
    assert progress.predicted_s(done, [tiny_run(model="resnet50")]) == pytest.approx(70 / 3)  # torch, 1 rank
    assert progress.predicted_s(done, [mxnet]) == pytest.approx(70 / 3)  # every run done
    assert progress.predicted_s([], [mxnet]) is None
    assert progress.predicted_s([{**_done(mxnet, 1.0), "elapsed_s": float("nan")}], [mxnet]) is None


def test_the_progress_line_counts_runs_and_blocks_and_predicts_the_rest(tmp_path):
    runs = [tiny_run(framework=fw, repeat=r) for r in (0, 1) for fw in ("torch", "mxnet")]
    statuses = [tmp_path / paths.run_status(run) for run in runs]
    for run, path, elapsed_s in zip(runs[:3], statuses, (60.0, 120.0, 90.0)):
        path.parent.mkdir(parents=True)
        path.write_text(json.dumps(_status(run, elapsed_s, "ok" if elapsed_s != 90.0 else "failed")))
    line = progress.line(statuses)
    # the mxnet run of block 1 left: as long as block 0's (120 s)
    assert line == (
        "dlscale: 3 of 4 runs done (1 failed), 1 of 2 blocks complete; "
        "the runs left take about 2.0 min (what runs like them took so far)"
    )


class _Bare(Trainer):
    """A Trainer with nothing but the contract's own code (for its properties)."""

    describe = gradient_sizes = sync = load = h2d = forward = backward = comm = update = None
    loss_value = checksum = state = profile_start = annotate = profile_stop = None


def test_only_a_run_through_horovod_waits_for_horovods_timeline():
    """A run through the framework's own collectives (JAX's, a native library's comm object) writes
    no timeline: the loop waiting for one cost each such run of 2 ranks 5 s."""
    bare = _Bare()
    assert not bare.writes_timeline  # no Horovod at all (JAX)
    bare.hvd = types.SimpleNamespace(start_timeline=lambda path: None)  # a native library's object
    assert not bare.writes_timeline
    bare.hvd = types.ModuleType("horovod.torch")
    assert bare.writes_timeline
