"""The benchmark scripts that time training through the harness, run shrunk (tinynet, few iterations,
one trial): they build their spec on bench/overhead.py's `harness_spec`, and a spec the harness no
longer takes (a key it came to need) fails here, not when someone next measures."""

import csv
import subprocess
import sys

from tests.conftest import ROOT

SHRUNK = ["--framework", "torch", "--model", "tinynet", "--trials", "1", "--iterations", "3", "--warmup", "1"]


def _run(script, out):
    proc = subprocess.run(
        [sys.executable, str(ROOT / "bench" / script), *SHRUNK, "--out", str(out)],
        capture_output=True,
        text=True,
        timeout=900,
    )
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-2000:]
    return list(csv.DictReader(out.open()))


def test_the_layout_benchmark_times_every_layout_against_the_best(tmp_path):
    rows = _run("layout.py", tmp_path / "layout.csv")
    assert sorted(r["layout"] for r in rows) == ["NCHW", "NHWC"]
    assert all(float(r["img_per_s"]) > 0 for r in rows)


def test_the_contention_benchmark_times_a_pair_and_two_ranks_against_one_alone(tmp_path):
    rows = _run("contention.py", tmp_path / "contention.csv")
    assert sorted(r["kind"] for r in rows) == ["pair", "ranks2"]
    assert all(float(r["ratio_to_alone"]) > 0 for r in rows)


def test_the_ready_profile_reads_each_gradients_hand_over_as_a_fraction_of_backward():
    """Two traced iterations of an MXNet rank: backward from 100 to 300 us after each io annotation;
    gradient 3 handed to Horovod at 250 us (0.75 of backward) and gradient 0 at its end (1.0)."""
    sys.path.insert(0, str(ROOT / "bench"))
    import ready_profile

    events = []
    for start in (0, 1000):
        events += [
            {"name": "dlscale:io", "cat": "framework", "ph": "X", "ts": start, "dur": 10},
            {"name": "_backward_Convolution", "cat": "framework", "ph": "X", "ts": start + 100, "dur": 100},
            {"name": "_backward_FullyConnected", "cat": "framework", "ph": "X", "ts": start + 200, "dur": 100},
            {
                "name": "NEGOTIATE_ALLREDUCE",
                "cat": "horovod",
                "ph": "X",
                "ts": start + 250,
                "dur": 5,
                "args": {"tensor": "horovod_allreduce.3"},
            },
            {
                "name": "NEGOTIATE_ALLREDUCE",
                "cat": "horovod",
                "ph": "X",
                "ts": start + 300,
                "dur": 5,
                "args": {"tensor": "horovod_allreduce.0"},
            },
        ]
    assert ready_profile.handed_over("mxnet", events) == [{3: 0.75, 0: 1.0}, {3: 0.75, 0: 1.0}]
    tf = [{**e, "args": {"tensor": "allreduce/grad12"}} if "args" in e else e for e in events[:5]]
    assert set(ready_profile.handed_over("mxnet", tf)[0]) == {12}  # TensorFlow's names: allreduce/grad<i>


def test_the_contention_model_benchmark_adds_the_allreduces_cpu_time_only_where_the_sweep_measured_it(tmp_path):
    """On the committed example's tables, the model made with the slowdowns and with the sweep's cores:
    where the sweep recorded no cores (a study made before it did) the two errors are the same, and
    where it did, on a node without spare CPUs, the model predicts no faster than without them."""
    out = tmp_path / "contention-model.csv"
    proc = subprocess.run(
        [
            sys.executable,
            str(ROOT / "bench" / "contention_model.py"),
            str(ROOT / "docs" / "example"),
            "--out",
            str(out),
        ],
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-2000:]
    rows = list(csv.DictReader(out.open()))
    assert rows and all(int(r["ranks_per_node"]) > 1 for r in rows)
    for r in rows:
        calibrated, with_cpu = float(r["error_calibrated"]), float(r["error_with_comm_cpu"])
        # the calibration's copy alone against the study's own 1-rank runs of it: the same work, near 1
        assert 0.5 < float(r["alone_vs_1rank"]) < 2, r
        if float(r["comm_cores"]) == 0:  # nothing shared: the allreduces at the sweep's speed either way
            assert with_cpu == calibrated and r["error_comm_total"] == r["error_comm_total_alone"], r
        else:  # sharing the CPUs with backward: the allreduces run no faster than the sweep's
            assert with_cpu >= calibrated and float(r["error_comm_total"]) >= float(r["error_comm_total_alone"]), r
