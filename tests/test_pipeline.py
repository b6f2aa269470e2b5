"""A real Snakemake run of a tiny study, what each of its stages made, then a second run that must do
nothing."""

import json
import re
import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pandas as pd
import pytest
import yaml

from dlscale.analysis import replayed, steps
from dlscale.analysis.prediction import TOLERANCE
from dlscale.core import paths, version
from dlscale.runtime.rule import Job
from dlscale.workloads.registry import build_model
from tests.conftest import ROOT, SNAKEMAKE, tiny_config


@pytest.fixture(scope="module")
def study(tmp_path_factory):
    """A real Snakemake run of a tiny study on images (the dataset rule makes and converts them, each
    framework's loader reads them): (config, its file, its results folder)."""
    tmp_path = tmp_path_factory.mktemp("pipeline")
    conf = tiny_config(
        tmp_path,
        repeats=2,
        logs=str(tmp_path / "logs"),
        classes=10,
        loader_workers=[1],
        data={"kind": "images", "images": 16, "shards": 2, "cache": str(tmp_path / "data")},
        contention={"trials": 1},
    )
    path = tmp_path / "config.yaml"
    path.write_text(yaml.safe_dump(conf))
    proc = subprocess.run(SNAKEMAKE + ["--configfile", str(path)], cwd=ROOT, capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr[-4000:]
    return conf, path, Path(conf["results"])


def _table(results, name, **read):
    return pd.read_csv(results / paths.TABLES[name], **read)


def test_every_run_trains_on_the_images(study):
    conf, _, results = study
    runs = _table(results, "runs")
    assert len(runs) == 8 and (runs["status"] == "ok").all(), runs[["status", "reasons"]]
    assert (runs["data"] == "images").all() and (runs["data_images"] == 16).all() and (runs["data_skipped"] == 0).all()
    assert (runs["loader_img_per_s"] > 0).all() and runs["data_hash"].nunique() == 1
    assert "images" in (Path(conf["logs"]) / "dataset.log").read_text()
    versions = dict(zip(runs["framework"], runs["framework_version"].astype(str)))
    assert versions["torch"].startswith("2.13.0") and versions["mxnet"] == "1.9.1"


def test_tidy_table_holds_every_iteration_and_traced_phase(study):
    tidy, traced = _table(study[2], "tidy"), study[0]["profile_iterations"]
    # native timing: 2 frameworks x (1 + 2 ranks) x 2 repeats x (the wall time of warm-up, measured and
    # traced iterations + 8 trace-derived rows per traced iteration: six phases, comm_total, overlap)
    assert traced >= 1 and len(tidy) == 2 * 3 * 2 * ((1 + 3 + traced) + traced * 8)
    assert set(tidy["phase"]) == {"io", "h2d", "forward", "backward", "comm", "update", "wall", "comm_total", "overlap"}
    assert set(tidy.loc[tidy["phase"] != "wall", "source"]) == {"trace"}
    assert set(tidy.loc[tidy["source"] == "trace", "profiled"]) == {True}
    run_metrics = _table(study[2], "run_metrics")
    assert len(run_metrics) == 8 and (run_metrics["iterations"] == 3).all()


def test_summary_has_every_configuration(study):
    summary = _table(study[2], "summary")
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


def test_allreduce_tables(study):
    results = study[2]
    fit = _table(results, "allreduce_fit", keep_default_na=False)
    assert fit[["nodes", "ranks_per_node", "path", "sizes", "failure"]].values.tolist() == [
        [1, 2, "horovod", 10, ""],
        [1, 2, "horovod_one", 1, ""],
        [1, 2, "horovod_tensors", 6, ""],
        [1, 2, "mpi", 10, ""],
    ]
    fitted = fit[fit["sizes"] >= 2]  # horovod_one swept one size here (from 1 MiB up): nothing to fit
    alpha, beta = (fitted.set_index("path")[k].astype(float) for k in ("alpha_s", "beta_s_per_byte"))
    # fitted, so finite; their signs and order are measurements (Horovod's alpha is its 1 ms cycle, and
    # the beta of sizes to 1 MiB can come out below 0 within noise)
    assert np.isfinite(alpha).all() and np.isfinite(beta).all()
    sweep = _table(results, "allreduce")
    assert sweep["bytes"].max() == 1 << 20 and (sweep["busbw_bytes_per_s"] > 0).all()
    assert _table(results, "replayed").empty and _table(results, "replay").empty  # no replay in this study


def test_performance_model_predicts_every_multi_rank_run(study):
    conf, _, results = study
    model = _table(results, "model")
    two = model[model["ranks"] == 2]
    assert len(two) == 4 and (two["predicted_iteration_s"] > 0).all() and two["error_iteration"].notna().all()
    assert (two["comm_total_s"] > 0).all() and two["overlap_ratio"].between(0, 1).all()
    assert (two["error_from_compute"] + two["error_from_exposed"] - two["error_iteration"]).abs().max() < 1e-9
    error = json.loads((results / paths.TABLES["model_error"]).read_text())
    assert error["runs"] == 4
    far = two.groupby(["framework", "allreduce_schedule"])["error_iteration"].median().abs() > TOLERANCE
    assert [(x["framework"], x["allreduce_schedule"]) for x in error["off_target"]] == far[far].index.tolist()
    assert all(x["reason"].startswith(("compute (", "exposed communication (")) for x in error["off_target"])
    params = list(build_model("torch", "tinynet", conf["classes"]).parameters())
    assert _table(results, "gradients").values.tolist() == [
        ["mxnet", "tinynet", len(params), 4 * sum(p.numel() for p in params)],
        ["torch", "tinynet", len(params), 4 * sum(p.numel() for p in params)],
    ]
    tensors = _table(results, "tensors")
    assert len(tensors) == 8 * len(params) and tensors["bytes"].gt(0).all()
    # each 2-rank prediction multiplies the 1-rank compute by the slowdown its calibration measured
    contention = _table(results, "contention", keep_default_na=False)
    assert sorted(contention["framework"]) == ["mxnet", "torch"] and (contention["ranks_per_node"] == 2).all()
    assert (contention["slowdown"] > 0).all() and (contention["trials"] == 1).all()
    measured = dict(zip(contention["framework"], contention["slowdown"]))
    assert [measured[f] for f in two["framework"]] == pytest.approx(two["compute_slowdown"].tolist())
    assert (two["slowdown_source"] == "measured (contention.csv)").all()
    assert (model.loc[model["ranks"] == 1, "compute_slowdown"] == 1.0).all()
    ext = _table(results, "extrapolation")
    assert ext["ranks"].max() == 1024 and set(ext["link"]) == set(conf["extrapolate"]["links"])
    assert ext["predicted_efficiency"].between(0, 1.0 + 1e-9).all()


def test_the_model_table_of_the_default_study_is_made_from_the_studys_model(study, tmp_path):
    """bench/default_study_model.py: a row per framework and network, the medians of its 2-rank runs, the
    table's earlier rows kept; a rank count without predicted runs is refused by name."""
    results = study[2]
    two = _table(results, "model").query("ranks == 2")
    out = tmp_path / "default-study-model.csv"
    out.write_text("study_commit,framework,model,note\nold,jax,alexnet,kept\n")
    bench = [sys.executable, str(ROOT / "bench" / "default_study_model.py"), str(results), "--note", "t", "--out"]
    done = subprocess.run([*bench, str(out)], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    table = pd.read_csv(out)
    assert table["framework"].tolist() == ["jax", "mxnet", "torch"] and table["note"].tolist() == ["kept", "t", "t"]
    for _, row in table.iloc[1:].iterrows():
        runs = two[two["framework"] == row["framework"]]
        assert row["runs"] == len(runs) == 2
        measured, predicted = runs["iteration_s"].median(), runs["predicted_iteration_s"].median()
        assert row["iteration_s"] == pytest.approx(measured, abs=1e-4)
        assert row["error_iteration"] == pytest.approx(predicted / measured - 1, abs=1e-4)
        lo = runs["error_ci_lo"].dropna().unique()  # the configuration's own, where its runs give one
        assert row["error_ci_lo"] == pytest.approx(lo[0], abs=1e-4) if len(lo) == 1 else pd.isna(row["error_ci_lo"])
    refused = subprocess.run([*bench, str(tmp_path / "none.csv"), "--ranks", "4"], capture_output=True, text=True)
    assert refused.returncode != 0 and "no run at 4 ranks that the model predicted" in refused.stderr
    assert not (tmp_path / "none.csv").exists()
    mixed = tmp_path / "mixed"  # one run of a framework at another batch: not the default study's table
    mixed.mkdir()
    two.assign(batch_size=[8] + [4] * (len(two) - 1)).to_csv(mixed / paths.TABLES["model"], index=False)
    refused = subprocess.run(
        [*bench[:2], str(mixed), *bench[3:], str(tmp_path / "none.csv")], capture_output=True, text=True
    )
    assert refused.returncode != 0 and "differ in ['batch_size']" in refused.stderr
    assert not (tmp_path / "none.csv").exists()


def test_runs_ran_in_the_designs_blocked_order(study):
    """Block 0's runs all before block 1's, each block in order.csv's seeded order: the order the runs
    started in (runs.csv `started`) is order.csv's."""
    _, _, results = study
    order = _table(results, "order")
    runs = _table(results, "runs").sort_values("started")
    assert runs["started"].is_unique
    started = [next(r for r in order["run"] if d.endswith(r)) for d in runs["run_dir"]]
    assert started == order.sort_values(["block", "position"])["run"].tolist()
    assert order["block"].tolist() == sorted(order["block"]) and set(order["block"]) == {0, 1}
    # every configuration runs once in each block
    per_block = [[r.rsplit("/", 1)[0] for r in order[order["block"] == b]["run"]] for b in (0, 1)]
    assert sorted(per_block[0]) == sorted(per_block[1])
    for block in per_block:  # and each configuration's frameworks back to back (the cells the block model compares)
        configurations = [r.split("/", 1)[1] for r in block]
        stretches = [c for i, c in enumerate(configurations) if i == 0 or c != configurations[i - 1]]
        assert len(stretches) == len(set(stretches)) == 2, configurations


def test_figures_and_reports(study):
    _, path, results = study
    for name in ("throughput", "efficiency", "phases", "input", "comparisons", "model", "extrapolation"):
        for ext in ("pdf", "png"):
            assert (results / paths.FIGURES / f"{name}.{ext}").stat().st_size > 1000
    # the figure checker (figures.problems) found nothing to say in any of them
    for log in ("figures.log", "model.log"):
        assert "figure " not in (Path(study[0]["logs"]) / log).read_text()
    # the paper-ready report and Snakemake's HTML report
    md = (results / paths.TABLES["report"]).read_text()
    # only the columns that vary; the constant ones said once above the table
    assert "| framework | ranks | img/s [95% CI] |" in md and "\\begin{tabular}" in md and "\\toprule" in md
    results_table = md.split("## Results")[1].split("As LaTeX")[0]  # (the noise table has rows like these too)
    assert "In every row: network tinynet, schedule overlap" in results_table
    assert results_table.count("| torch | ") == 2 and "![throughput](figures/throughput.png)" in md
    assert md.startswith("# dlscale: ") and "## Performance model" in md
    # every run says the code that launched it; here the report's own, so the report names one commit
    assert set(replayed.read_table(results / paths.TABLES["runs"])["dlscale_commit"]) == {version.commit()}
    assert f"dlscale commit `{version.commit()}`\n" in md
    assert "## Hardware" in md and " GiB memory; GPU: none" in md and "- link: one node" in md
    assert re.search(r"- math libraries: .*PyTorch: MKL \S+, oneDNN v[\d.]+", md)  # from the runs' own build
    assert "\n- design: blocked, 2 blocks" in md or "\n- design: blocked, 3 blocks" in md
    # how the numbers were summarized, from this study's own summary and settings
    rules = md.split("### Methods: the twelve rules")[1].split("\n## ")[0]
    assert "harmonic mean" in rules and "\n12. figures plot" in rules and "far-out iterations" in rules
    assert "## Framework comparisons" in md and "| mxnet (horovod) / torch (horovod) | tinynet |" in md
    pairs = _table(results, "comparisons")  # the report's and the figure's one source
    assert sorted(zip(pairs["a"], pairs["b"], pairs["ranks"])) == [("mxnet", "torch", 1), ("mxnet", "torch", 2)]
    assert md.count("| mxnet (horovod) / torch (horovod) | tinynet |") == len(pairs)
    assert set(pairs["verdict"]) <= {"a faster", "b faster", "equal", "unresolved"} and (pairs["blocks"] >= 2).all()
    # the model's error as a table, one row per predicted configuration; no raw JSON
    head = "| configuration | runs | measured iteration (s) | predicted (s) | compute slowdown | error (95% interval) |"
    rows = md.split(head + " reason |")[1].split("\n\n")[0]
    assert len(re.findall(r"\| [+-]\d+\.\d% \[[+-]\d+\.\d%, [+-]\d+\.\d%\] \|", rows)) == 2  # from the 2 runs' spread
    assert rows.count("(measured (contention.csv))") == 2  # each 2-rank row with its measured slowdown
    assert md.count("| torch tinynet overlap") + md.count("| mxnet tinynet overlap") == 2 and "```json" not in md
    html = results / paths.HTML_REPORT
    proc = subprocess.run(
        SNAKEMAKE + ["--configfile", str(path), "--report", str(html)], cwd=ROOT, capture_output=True, text=True
    )
    assert proc.returncode == 0 and html.stat().st_size > 10000, proc.stderr[-3000:]
    text = html.read_text(errors="replace")
    for name in ("throughput.png", "efficiency.png", "phases.png", "input.png", "model.png", "extrapolation.png"):
        assert name in text, name
    assert "summary.csv" in text


def test_every_declared_log_accounts_for_its_step(study):
    logs = Path(study[0]["logs"])
    for name in ("tidy", "run_metrics", "summary", "figures", "model", "allreduce_tables", "replay_tables", "report"):
        assert "wrote " in (logs / f"{name}.log").read_text(), name
    assert "read 8 runs: 8 ok, 0 failed" in (logs / "tidy.log").read_text()


def test_the_model_reads_the_tables_alone(study, tmp_path):
    """Without the run folders the model's step gives the same table."""
    conf, _, results = study
    moved = tmp_path / "runs-away"
    (results / paths.RUNS).rename(moved)
    try:
        out = tmp_path / "again"
        out.mkdir()
        outputs = SimpleNamespace(
            table=out / "model.csv",
            replay=out / "replay.csv",
            error=out / "model_error.json",
            gradients=out / "g.csv",
            extrapolation=out / "e.csv",
            figures=[str(out / f"{n}.png") for n in ("model", "extrapolation", "replay")],
        )
        inputs = SimpleNamespace(
            **{k: results / paths.TABLES[k] for k in ("run_metrics", "runs", "tensors", "replayed", "contention")},
            sweep=results / paths.TABLES["allreduce"],
            fit=results / paths.TABLES["allreduce_fit"],
            plans=[],
        )
        params = {"extrapolate": json.dumps(conf["extrapolate"])}
        steps.write_model(Job.of(input=vars(inputs), output=vars(outputs), params=params, log=[out / "model.log"]))
        assert pd.read_csv(out / "model.csv").equals(_table(results, "model"))
    finally:
        moved.rename(results / paths.RUNS)


def test_a_second_run_does_nothing(study):
    again = subprocess.run(
        SNAKEMAKE + ["--configfile", str(study[1]), "--dry-run"], cwd=ROOT, capture_output=True, text=True
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

    from dlscale.analysis import steps

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


def test_the_docs_example_is_current_in_form(study, tmp_path):
    """`dlscale example` on a fresh study gives the form (report sections, figures) of the committed
    docs/example: a change to the report that the example lacks fails here (numbers are not compared)."""
    from dlscale.runtime import example

    _, _, results = study
    proc = subprocess.run(
        [str(ROOT / ".venv" / "bin" / "dlscale"), "example", str(results), str(tmp_path / "example")],
        cwd=ROOT,
        capture_output=True,
        text=True,
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert example.form_of(tmp_path / "example") == example.form_of(ROOT / "docs" / "example")
    assert (tmp_path / "example" / "report.md").read_text().startswith(example.HEADER)
    assert all((tmp_path / "example" / paths.TABLES[t]).is_file() for t in example.TABLES_READ)


def test_a_study_compares_with_the_docs_example(study, tmp_path):
    """The guide's first comparison: a finished study beside the shipped example (`dlscale compare
    results docs/example`), which carries the tables compare reads."""
    _, _, results = study
    proc = subprocess.run(
        [str(ROOT / ".venv" / "bin" / "dlscale"), "compare", str(results), "docs/example", "-o", str(tmp_path / "c")],
        cwd=ROOT,
        capture_output=True,
        text=True,
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    text = (tmp_path / "c" / "compare.md").read_text()
    assert "**example**" in text and "(the reference)" in text


@pytest.mark.parametrize(
    "change, remade",
    [
        ("threads_per_rank=2", "peak"),
        ("framework=[torch]", "peak"),
        ("image_size=96", "flops"),
        ("classes=20", "flops"),
        ("title=another", "paper_report"),
        ("framework=[torch,jax]", "order"),  # as many runs as before, not the same runs
        ("seed=7", "run"),
        ("allreduce_max_bytes=2048", "allreduce"),
    ],
)
def test_a_changed_config_value_remakes_the_step_that_reads_it(study, change, remade):
    """Every config value a step reads is a declared param: changing it remakes the step (a stale
    peak.csv would make MFU silently wrong)."""
    _, path, _ = study
    argv = SNAKEMAKE + ["--configfile", str(path), "--dry-run", "--config", change]
    proc = subprocess.run(argv, cwd=ROOT, capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert re.search(rf"^rule {remade}:$", proc.stdout, re.M), proc.stdout[-3000:]


def test_a_longer_time_limit_remakes_nothing(study):
    """A run's time limit is its rule's resource, not a param: raising it redoes no measured run or sweep."""
    _, path, _ = study
    argv = SNAKEMAKE + ["--configfile", str(path), "--dry-run", "--config", "run_timeout_s=3600"]
    proc = subprocess.run(argv, cwd=ROOT, capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr[-3000:]
    # only the report, which states the whole config
    remade = set(re.findall(r"^rule (\w+):$", proc.stdout, re.M)) - {"study", "all"}  # the targets
    assert remade == {"paper_report"}, proc.stdout[-3000:]
