"""The benchmark scripts that time training through the harness, run shrunk (tinynet, few iterations,
one trial): they build their spec on bench/overhead.py's `harness_spec`, and a spec the harness no
longer takes (a key it came to need) fails here, not when someone next measures."""

import csv
import os
import shutil
import subprocess
import sys

import pytest

from tests.conftest import EMULATION, ROOT, WHY_NO_EMULATION

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


def test_the_node_cpus_benchmark_sets_the_ranks_cpus_beside_the_hosts(tmp_path):
    """On the committed example's tables (recorded before ranks said their affinity) the two models are
    the same; with its hosts made of 4 CPUs and each rank allowed 1, the model as it is shares the two
    CPUs its ranks had (a lower rate, a longer predicted iteration), the old one the host's four."""
    example = tmp_path / "example"
    shutil.copytree(ROOT / "docs" / "example", example)
    script = [sys.executable, str(ROOT / "bench" / "node_cpus.py"), str(example)]

    def rows(out):
        proc = subprocess.run([*script, "--out", str(out)], capture_output=True, text=True, timeout=600)
        assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-2000:]
        return list(csv.DictReader(out.open()))

    # measured rates of 1 for PyTorch's and TensorFlow's networks on one node: as if no CPU were shared
    measured = tmp_path / "sharing.csv"
    lines = [f"{fw},{net},one node,1.0,1.0" for fw in ("torch", "tensorflow") for net in ("alexnet", "resnet50")]
    measured.write_text("framework,model,place,compute_rate,comm_rate\n" + "\n".join(lines) + "\n")
    script += ["--sharing", str(measured)]
    same = rows(tmp_path / "same.csv")
    assert same and all(r["error_host_cpus"] == r["error_recorded_cpus"] for r in same)
    # with no CPU taken by the allreduces (its 2 ranks share 2 CPUs), no iteration is predicted longer
    assert all(float(r["error_no_sharing"]) <= float(r["error_recorded_cpus"]) for r in same)
    assert any(float(r["error_no_sharing"]) < float(r["error_recorded_cpus"]) for r in same)
    for r in same:  # the measured rates where there are (1-thread rows of those frameworks), else none
        rated = r["framework"] in ("torch", "tensorflow") and r["threads_per_rank"] == "1"
        assert r["error_measured_rates"] == (r["error_no_sharing"] if rated else ""), r
    assert any(r["error_measured_rates"] for r in same) and any(not r["error_measured_rates"] for r in same)
    runs = example / "runs.csv"
    text = runs.read_text().replace('""logical_cpus"": 2', '""logical_cpus"": 4, ""cpus_allowed"": 1')
    assert text != runs.read_text()
    runs.write_text(text)
    held = rows(tmp_path / "held.csv")
    assert {r["node_cpus_host"] for r in held} == {"4"} and {r["node_cpus_recorded"] for r in held} == {"2"}
    assert all(float(r["shared_rate_recorded"]) <= float(r["shared_rate_host"]) for r in held)
    assert any(float(r["shared_rate_recorded"]) < float(r["shared_rate_host"]) for r in held)
    assert any(float(r["error_recorded_cpus"]) > float(r["error_host_cpus"]) for r in held)


def test_the_device_choice_benchmark_says_which_verdict_a_measured_ratio_supports():
    """A verdict of the buyer's table is the measurement's only where the ratio's interval lies wholly on
    one side of the 5% band (or within it); the paired ratio is over the blocks both options ran."""
    import math

    import pandas as pd

    from bench import device_choice as dc

    assert dc.supported(1.10, 1.30) == "faster" and dc.supported(0.70, 0.90) == "slower"
    assert dc.supported(0.97, 1.04) == "equal"
    assert dc.supported(0.66, 1.55) == "unresolved" and dc.supported(1.02, 1.20) == "unresolved"
    assert dc.supported(math.nan, math.nan) == "unresolved"
    # three blocks, the option 1.2x, 1.25x and 1.15x the big device's throughput in each: drift cancels
    big = pd.DataFrame({"repeat": [0, 1, 2], dc.RATE: [10.0, 20.0, 5.0]})
    option = pd.DataFrame({"repeat": [2, 0, 1], dc.RATE: [5.75, 12.0, 25.0]})
    ratio, lo, hi = dc._paired(option, big, 0.95)
    assert ratio == pytest.approx(math.exp(sum(math.log(x) for x in (1.2, 1.25, 1.15)) / 3))
    assert lo < 1.15 < 1.25 < hi and dc.supported(lo, hi) == "faster"
    assert math.isnan(dc._paired(option.iloc[:1], big, 0.95)[0])  # one block: no interval


@pytest.mark.parametrize("emulated", [None, 500], ids=["one node", "two emulated nodes"])
def test_the_sharing_benchmark_rates_compute_and_an_allreduce_each_beside_the_other(tmp_path, emulated):
    """Shrunk: tinynet, whose steps are short, against a 64 KiB allreduce, enough iterations for both runs
    to measure at once with allreduces beside them (the benchmark refuses fewer than 3 of each): a remote
    emulated node's run begins about 3 s after node 0's."""
    if emulated and not EMULATION:
        pytest.skip(WHY_NO_EMULATION)
    out = tmp_path / "sharing.csv"
    iterations = "2000" if emulated else "300"
    argv = [*SHRUNK[:4], "--trials", "1", "--iterations", iterations, "--warmup", "1", "--bytes", "65536"]
    argv += ["--loop-s", "1", *(["--emulated", str(emulated)] if emulated else [])]
    proc = subprocess.run(
        [sys.executable, str(ROOT / "bench" / "sharing.py"), *argv, "--out", str(out)],
        capture_output=True,
        text=True,
        timeout=900,
    )
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-2000:]
    (row,) = list(csv.DictReader(out.open()))
    place = "2 emulated nodes at 500 Mbit/s" if emulated else "one node"
    assert (row["framework"], row["model"], row["place"], row["bytes"]) == ("torch", "tinynet", place, "65536")
    for rate in ("compute_rate", "comm_rate", "training_rate"):
        assert 0 < float(row[rate]) < 2, (rate, row)  # a rate, not seconds: each over its own alone
    assert int(row["beside_repetitions"]) >= 3
    assert 0 < float(row["rule_rate"]) <= 1 and float(row["loop_cores"]) > 0
    assert row["node_cpus"] == ("1" if emulated else str(len(os.sched_getaffinity(0))))
