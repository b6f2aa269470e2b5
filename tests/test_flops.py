"""Compute efficiency: FLOPs per image counted from the networks' definitions, the measured
matrix-multiply rate, and model FLOP utilisation (MFU) in the summary."""

import json

import pandas as pd
import pytest
from conftest import env_record, tiny_config

from dlscale.analysis import metrics
from dlscale.core import pythons
from dlscale.runtime import peak
from dlscale.workloads import flops, frameworks


@pytest.mark.parametrize("model, gmacs", [("alexnet", 0.714), ("googlenet", 1.498), ("resnet50", 4.089)])
def test_forward_work_at_224_is_torchvisions_published_figure(model, gmacs):
    counted = flops.per_image(model, 224)
    assert counted["forward_macs"] / 1e9 == pytest.approx(gmacs, rel=0.01)
    assert counted["train_flops"] == 6 * counted["forward_macs"]


def test_a_network_counted_by_hand():
    # tinynet at 64x64, 10 classes: conv 3->8 (3x3, stride 2) gives 8x32x32 outputs of 27 MACs,
    # conv 8->16 (stride 2) 16x16x16 of 72, the classifier 10 x 256
    macs = 8 * 32 * 32 * 27 + 16 * 16 * 16 * 72 + 10 * 256
    assert flops.per_image("tinynet", 64, 10) == {"forward_macs": macs, "train_flops": 6 * macs}


@pytest.mark.parametrize("framework", [fw for fw in frameworks.NAMES if fw != frameworks.REFERENCE])
def test_every_framework_counts_the_references_work(framework):
    # each in its own Python, as the pipeline's flops step counts on a study without PyTorch; sizes
    # that pool and pad unevenly
    models = ["alexnet", "googlenet", "resnet50", "tinynet"]
    python = env_record(framework)["python"]
    for size, classes in [(224, 1000), (131, 7)]:
        done = pythons.run_module(python, flops.__name__, [framework, ",".join(models), size, classes])
        assert done.returncode == 0, done.stderr[-2000:]
        counted = json.loads(done.stdout.splitlines()[-1])
        assert counted == flops.table(models, size, classes), (framework, size)


@pytest.mark.parametrize(
    "study, counter",
    [
        (["jax", "torch"], "torch"),
        (["jax", "mxnet"], "mxnet"),
        (["jax"], "jax"),
        (["mxnet", "tensorflow"], "tensorflow"),
    ],
)
def test_a_study_counts_on_the_reference_where_it_runs_it_else_on_the_first_it_runs(study, counter):
    assert flops.counter(study) == counter


def test_mfu_is_useful_flops_per_rank_over_the_frameworks_matmul_rate():
    work = flops.per_image("tinynet", 64, 10)["train_flops"]
    summary = pd.DataFrame(
        {
            "framework": ["torch", "mxnet"],
            "model": ["tinynet"] * 2,
            "image_size": [64] * 2,
            "classes": [10] * 2,
            "ranks": [2, 1],
            "threads_per_rank": [1, 2],
            "throughput_img_per_s": [1000.0, 400.0],
        }
    )
    # each framework's rate at each thread count: the run's own is taken
    peak_table = pd.DataFrame(
        {
            "framework": ["torch", "mxnet", "torch", "mxnet"],
            "threads": [1, 2, 2, 1],
            "matmul_flops_s": [50e9, 40e9, 1, 1],
        }
    )
    flops_table = pd.DataFrame(flops.table(["tinynet"], 64, 10), columns=flops.COLUMNS)
    got = metrics.add_mfu(summary, peak_table, flops_table).set_index("framework")
    assert got.loc["torch", "mfu"] == pytest.approx(500 * work / 50e9)
    assert got.loc["mxnet", "mfu"] == pytest.approx(400 * work / 40e9)


def test_the_matmul_rate_is_measured_per_framework(tmp_path):
    out = tmp_path / "peak.csv"
    with pytest.raises(SystemExit):  # a Python named without its framework
        peak.main([str(out), "--framework", "torch", "--python", "/usr/bin/python3"])
    assert peak.main([str(out), "--framework", "torch", "mxnet", "--threads", "1"]) == 0
    table = pd.read_csv(out)
    assert list(table["framework"]) == ["torch", "mxnet"] and (table["n"] == 2048).all()
    # in FLOP/s (GFLOP/s would read ~70): one core does at most 500 GFLOP/s in float32, and at least
    # 0.1 leaves room for load (70 idle here, 7 with 8 busy loops on the 2 cores)
    assert table["matmul_flops_s"].between(1e8, 5e11).all()
    assert (table["matmul_flops_s_min"] <= table["matmul_flops_s"]).all()
    # a study's matmul_size: that N, and only a study that sets it has it among the rule's settings
    assert peak.main([str(out), "--framework", "torch", "--size", "256"]) == 0
    assert list(pd.read_csv(out)["n"]) == [256]
    assert "size" not in peak.rule_settings(tiny_config(tmp_path, matmul_size=None))
    assert peak.rule_settings(tiny_config(tmp_path, matmul_size=256))["size"] == 256
