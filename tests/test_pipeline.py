"""A real Snakemake run of a tiny study, then a second run that must do nothing."""

import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pandas as pd
import yaml

from analysis.model import TOLERANCE
from tests.conftest import ROOT, tiny_config

SNAKEMAKE = [sys.executable, "-m", "snakemake", "--nolock", "--cores", "2"]


def test_tiny_study_end_to_end(tmp_path):
    # on images: the dataset rule makes and converts them, each framework's loader reads them
    conf = tiny_config(
        tmp_path,
        repeats=2,
        logs=str(tmp_path / "logs"),
        classes=10,
        loader_workers=[1],
        data={"kind": "images", "images": 16, "shards": 2, "cache": str(tmp_path / "data")},
    )
    path = tmp_path / "config.yaml"
    path.write_text(yaml.safe_dump(conf))
    proc = subprocess.run(SNAKEMAKE + ["--configfile", str(path)], cwd=ROOT, capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr[-4000:]
    results = Path(conf["results"])

    runs = pd.read_csv(results / "runs.csv")
    assert len(runs) == 8 and (runs["status"] == "ok").all(), runs[["status", "reasons"]]
    assert (runs["data"] == "images").all() and (runs["data_images"] == 16).all() and (runs["data_skipped"] == 0).all()
    assert (runs["loader_img_per_s"] > 0).all() and runs["data_hash"].nunique() == 1
    assert "images" in (Path(conf["logs"]) / "dataset.log").read_text()
    versions = dict(zip(runs["framework"], runs["framework_version"].astype(str)))
    assert versions["torch"].startswith("2.13.0") and versions["mxnet"] == "1.9.1"

    tidy = pd.read_csv(results / "tidy.csv")
    # native timing: 2 frameworks x (1 + 2 ranks) x 2 repeats x (the wall time of warm-up, measured and
    # traced iterations + 8 trace-derived rows per traced iteration: six phases, comm_total, overlap)
    assert len(tidy) == 2 * 3 * 2 * ((1 + 3 + 3) + 3 * 8)
    assert set(tidy["phase"]) == {"io", "h2d", "forward", "backward", "comm", "update", "wall", "comm_total", "overlap"}
    assert set(tidy.loc[tidy["phase"] != "wall", "source"]) == {"trace"}
    assert set(tidy.loc[tidy["source"] == "trace", "profiled"]) == {True}

    summary = pd.read_csv(results / "summary.csv")
    assert sorted(zip(summary["framework"], summary["ranks"])) == [
        ("mxnet", 1),
        ("mxnet", 2),
        ("torch", 1),
        ("torch", 2),
    ]
    assert (summary["throughput_img_per_s"] > 0).all() and (summary["repeats_ok"] == 2).all()
    assert (summary.loc[summary["ranks"] == 1, "efficiency"] == 1.0).all()
    assert summary["throughput_img_per_s_ci_lo"].notna().all()
    assert (summary["loader_img_per_s"] > 0).all() and (summary["loader_utilisation"] > 0).all()

    fit = pd.read_csv(results / "allreduce_fit.csv", keep_default_na=False)
    assert fit[["nodes", "ranks_per_node", "path", "sizes", "failure"]].values.tolist() == [
        [1, 2, "horovod", 10, ""],
        [1, 2, "horovod_tensors", 6, ""],
        [1, 2, "mpi", 10, ""],
    ]
    alpha, beta = (fit.set_index("path")[k].astype(float) for k in ("alpha_s", "beta_s_per_byte"))
    # fitted, so finite; their signs and order are measurements (Horovod's alpha is its 1 ms cycle, and
    # the beta of sizes to 1 MiB can come out below 0 within noise)
    assert np.isfinite(alpha).all() and np.isfinite(beta).all()
    sweep = pd.read_csv(results / "allreduce.csv")
    assert sweep["bytes"].max() == 1 << 20 and (sweep["busbw_bytes_per_s"] > 0).all()
    assert pd.read_csv(results / "replay.csv").empty  # no replay in this study

    # communication and the performance model: every 2-rank run predicted, timeline comm measured
    model = pd.read_csv(results / "model.csv")
    two = model[model["ranks"] == 2]
    assert len(two) == 4 and (two["predicted_iteration_s"] > 0).all() and two["error_iteration"].notna().all()
    assert (two["comm_total_s"] > 0).all() and two["overlap_ratio"].between(0, 1).all()
    assert (two["error_from_compute"] + two["error_from_exposed"] - two["error_iteration"]).abs().max() < 1e-9
    error = json.loads((results / "model_error.json").read_text())
    assert error["runs"] == 4
    far = two.groupby(["framework", "comm"])["error_iteration"].median().abs() > TOLERANCE
    assert [(x["framework"], x["comm"]) for x in error["off_target"]] == far[far].index.tolist()
    assert all(x["reason"].startswith(("compute (", "exposed communication (")) for x in error["off_target"])
    grads = pd.read_csv(results / "gradients.csv")
    from workloads.registry import build_model

    params = list(build_model("torch", "tinynet", conf["classes"]).parameters())
    assert grads.values.tolist() == [
        ["mxnet", "tinynet", len(params), 4 * sum(p.numel() for p in params)],
        ["torch", "tinynet", len(params), 4 * sum(p.numel() for p in params)],
    ]
    ext = pd.read_csv(results / "extrapolation.csv")
    assert ext["ranks"].max() == 1024 and set(ext["link"]) == set(conf["extrapolate"]["links"])
    assert ext["predicted_efficiency"].between(0, 1.0 + 1e-9).all()

    for name in ("throughput", "efficiency", "phases", "input", "model", "extrapolation"):
        for ext in ("pdf", "png"):
            assert (results / "figures" / f"{name}.{ext}").stat().st_size > 1000

    # the paper-ready report and Snakemake's HTML report
    md = (results / "report.md").read_text()
    assert "| framework | network | comm |" in md and "\\begin{tabular}" in md and "\\toprule" in md
    results_table = md.split("## Results")[1].split("As LaTeX")[0]  # (the noise table has rows like these too)
    assert results_table.count("| torch | tinynet |") == 2 and "![throughput](figures/throughput.png)" in md
    assert "dlscale commit:" in md and "## Performance model" in md
    # the model's error as a table, one row per predicted configuration; no raw JSON
    assert "| configuration | runs | measured iteration (s) | predicted (s) | error | reason |" in md
    assert md.count("| torch tinynet overlap") + md.count("| mxnet tinynet overlap") == 2 and "```json" not in md
    html = results / "report.html"
    proc = subprocess.run(
        SNAKEMAKE + ["--configfile", str(path), "--report", str(html)], cwd=ROOT, capture_output=True, text=True
    )
    assert proc.returncode == 0 and html.stat().st_size > 10000, proc.stderr[-3000:]
    text = html.read_text(errors="replace")
    for name in (
        "throughput.png",
        "efficiency.png",
        "phases.png",
        "input.png",
        "model.png",
        "extrapolation.png",
        "summary.csv",
    ):
        assert name in text, name

    # every declared log is written, with an account of the step
    logs = Path(conf["logs"])
    for name in ("tidy", "summary", "figures", "model", "allreduce_tables", "report"):
        assert "wrote " in (logs / f"{name}.log").read_text(), name
    assert "read 8 runs: 8 ok, 0 failed" in (logs / "tidy.log").read_text()
    tensors = pd.read_csv(results / "tensors.csv")
    assert len(tensors) == 8 * len(params) and tensors["bytes"].gt(0).all()
    # the performance model reads the tables alone: without the run folders it gives the same table
    from types import SimpleNamespace

    from analysis import steps

    moved = tmp_path / "runs-away"
    (results / "runs").rename(moved)
    out = tmp_path / "again"
    outputs = SimpleNamespace(
        table=out / "model.csv",
        replay=out / "replay.csv",
        error=out / "model_error.json",
        gradients=out / "g.csv",
        extrapolation=out / "e.csv",
        figures=[str(out / f"{n}.png") for n in ("model", "extrapolation", "replay")],
    )
    out.mkdir()
    inputs = SimpleNamespace(
        **{k: results / f"{k}.csv" for k in ("tidy", "runs", "tensors")},
        sweep=results / "allreduce.csv",
        fit=results / "allreduce_fit.csv",
        replays=[],
        plans=[],
    )
    steps.write_model(inputs, outputs, conf["extrapolate"], {}, out / "model.log")
    assert pd.read_csv(out / "model.csv").equals(model)
    (moved).rename(results / "runs")

    again = subprocess.run(
        SNAKEMAKE + ["--configfile", str(path), "--dry-run"], cwd=ROOT, capture_output=True, text=True
    )
    assert again.returncode == 0
    assert "Nothing to be done" in again.stdout + again.stderr


def test_bad_config_stops_before_anything_runs(tmp_path):
    conf = tiny_config(tmp_path, framework=["torch", "caffe"])
    path = tmp_path / "config.yaml"
    path.write_text(yaml.safe_dump(conf))
    proc = subprocess.run(SNAKEMAKE + ["--configfile", str(path)], cwd=ROOT, capture_output=True, text=True)
    assert proc.returncode != 0
    assert "config key 'framework[1]': 'caffe' is not one of" in proc.stdout + proc.stderr
    assert not Path(conf["results"]).exists()


def test_steps_in_threads_keep_their_logs_apart(tmp_path):
    # profiles/default runs the rules' steps in threads of Snakemake's process; standard output is
    # the process's, so two steps at once must not write into each other's logs
    import threading
    import time

    from analysis import steps

    profile = yaml.safe_load((ROOT / "profiles" / "default" / "config.yaml").read_text())
    assert profile["force-use-threads"] is True

    def step(name):
        with steps.logged(tmp_path / f"{name}.log"):
            for i in range(5):
                print(f"{name} {i}")
                time.sleep(0.01)

    threads = [threading.Thread(target=step, args=(name,)) for name in ("a", "b")]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    for name in ("a", "b"):
        assert (tmp_path / f"{name}.log").read_text().split() == " ".join(f"{name} {i}" for i in range(5)).split()
