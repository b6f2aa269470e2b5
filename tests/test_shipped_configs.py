"""Every shipped study config, run end to end through the Snakefile to the report as users run it
(`snakemake --configfile config/X.yaml`), shrunk (tests/study.py) but keeping its dimensions, rank
counts, timing, device and launcher. A study this machine cannot run as asked (a GPU study without a
GPU, a Slurm study outside Slurm) ends with its runs failed for that reason and every table made."""

import json
import os
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest

from dlscale.core import paths
from dlscale.runtime import config as cfg
from dlscale.runtime import slurm
from tests.conftest import EMULATION, ROOT, WHY_NO_EMULATION
from tests.study import run_shrunk

SHIPPED = sorted(p.name for p in (ROOT / "config").glob("*.yaml") if p.name != "schema.yaml")
# The overlays each shipped study is run with, as its docs show (config/<name> alone by default).
OVERLAYS = {
    "libraries.yaml": ["config/emulated.yaml", "config/libraries.yaml"],
    "slurm-emulated.yaml": ["config/slurm.yaml", "config/slurm-emulated.yaml"],
}
# Why the runs of a study fail on a machine like CI's (2 cores, no GPU, no Slurm), or None.
EXPECTED_FAILURE = {"gpu.yaml": "GPU", "slurm.yaml": "srun", "slurm-emulated.yaml": "srun"}


def expected_failure(name, config):
    if name == "gpu.yaml" and os.environ.get("DLSCALE_ENV_VARIANT") == "cuda":
        return None  # the cuda environment on a GPU machine runs it
    if name.startswith("slurm") and slurm.available()[0]:
        pytest.skip("this machine can run a Slurm cluster: the study is run under Slurm by tests/test_slurm_cluster.py")
    return EXPECTED_FAILURE.get(name)


def test_every_shipped_config_is_run_here():
    assert SHIPPED == [
        "config.yaml",
        "device-choice-emulated.yaml",
        "device-choice.yaml",
        "emulated.yaml",
        "gpu.yaml",
        "libraries.yaml",
        "loader.yaml",
        "slurm-emulated.yaml",
        "slurm.yaml",
    ]


@pytest.mark.timeout(1800)
@pytest.mark.parametrize("name", SHIPPED)
def test_shipped_study_runs_end_to_end_shrunk(name, tmp_path):

    files = OVERLAYS.get(name, [f"config/{name}"])
    layered = cfg.layered([cfg.resolve(f) for f in files])
    if layered.get("emulate") and not EMULATION:
        pytest.skip(f"{name}: {WHY_NO_EMULATION}")
    why = expected_failure(name, layered)
    proc, conf = run_shrunk(files, tmp_path)
    assert proc.returncode == 0, proc.stderr[-5000:]
    results = Path(conf["results"])

    runs = pd.read_csv(results / "runs.csv", keep_default_na=False)
    matrix = cfg.matrix(conf)
    assert len(runs) == len(matrix)
    for key in (
        "framework",
        "allreduce_schedule",
        "timing",
        "nodes",
        "ranks_per_node",
        "loader_workers",
        "threads_per_rank",
    ):
        wanted = cfg.threads(conf) if key == "threads_per_rank" else conf[key]
        assert sorted(set(runs[key])) == sorted(set(wanted)), key  # the study's dimensions are kept
    assert sorted(set(zip(runs["framework"], runs["allreduce_library"]))) == sorted(
        {(r["framework"], r["allreduce_library"]) for r in matrix}
    )
    if why:
        assert (runs["status"] == "failed").all()
        assert runs["reasons"].str.contains(why).all(), runs["reasons"].tolist()
    else:
        assert (runs["status"] == "ok").all(), runs[["status", "reasons"]]

    # every table, figure and the report, whatever ran
    for table in (
        "tidy.csv",
        "tensors.csv",
        "run_metrics.csv",
        "summary.csv",
        "allreduce.csv",
        "allreduce_fit.csv",
        "model.csv",
        "replay.csv",
        "gradients.csv",
        "extrapolation.csv",
        "peak.csv",
        "flops.csv",
        "contention.csv",
    ):
        assert (results / table).is_file(), table
    drawn = paths.FIGURE_NAMES + paths.model_figures(layered.get("replay"))  # the replay figure only with replays
    for path in paths.figure_paths(results / "figures", drawn):
        assert Path(path).stat().st_size > 1000, path
    assert ("replay" in drawn) == (results / "figures" / "replay.png").is_file()
    if why == "GPU":  # no framework may time its CPU as the GPU (TensorFlow's soft placement did)
        peak = pd.read_csv(results / "peak.csv", keep_default_na=False)
        assert peak["failure"].str.contains("GPU|CUDA").all(), peak[["framework", "failure"]]
    error = json.loads((results / "model_error.json").read_text())
    report = (results / "report.md").read_text()
    multi_rank = any(r["nodes"] * r["ranks_per_node"] > 1 for r in matrix)
    if why or not multi_rank:
        assert error["runs"] == 0 and error["reason"], error  # why nothing was predicted, in words
        assert error["reason"] in report
    else:
        assert error["runs"] > 0
    if len(layered.get("allreduce_library", [])) > 1 and not why:  # the libraries compared, with intervals
        assert "## Communication libraries" in report and "native / horovod" in report
        assert set(error["by_library"]) == set(layered["allreduce_library"])
        table = tmp_path / "libraries.csv"  # the table bench/libraries.py makes of the study
        bench = subprocess.run(
            [sys.executable, str(ROOT / "bench" / "libraries.py"), str(results), "--out", str(table)],
            capture_output=True,
            text=True,
        )
        assert bench.returncode == 0, bench.stderr
        made = pd.read_csv(table, keep_default_na=False)
        assert set(zip(made["framework"], made["allreduce_library"])) == set(
            zip(runs["framework"], runs["allreduce_library"])
        )
        assert (made["differs"] != "").sum() == len(made) // 2  # one ratio per configuration, on its native row
    if layered.get("replay") and not why:
        replayed = pd.read_csv(results / "replay.csv")
        assert set(replayed["nodes"]) == {min(layered["replay"]["nodes"])}
