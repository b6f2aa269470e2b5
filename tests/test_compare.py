"""`dlscale compare` and `dlscale plan` on two real finished studies (shrunk) that differ in threads per rank and share
only part of their work; and its tables on known data."""

import subprocess

import pandas as pd
import pytest
import yaml

from dlscale.analysis import compare, model, plan
from dlscale.core.vocabulary import BASELINE_KEYS
from tests.conftest import ROOT, SNAKEMAKE, tiny_config

DLSCALE = ROOT / ".venv" / "bin" / "dlscale"


def _study(folder, **over):
    """A tiny finished study in `folder` (its results folder)."""
    folder.mkdir(parents=True)
    conf = tiny_config(folder, repeats=2, logs=str(folder / "logs"), **over)
    path = folder / "study.yaml"
    path.write_text(yaml.safe_dump(conf))
    proc = subprocess.run(SNAKEMAKE + ["--configfile", str(path)], cwd=ROOT, capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr[-3000:]
    return folder / "results"


@pytest.fixture(scope="module")
def studies(tmp_path_factory):
    root = tmp_path_factory.mktemp("compare")
    one = _study(root / "one-thread", framework=["torch"], threads_per_rank=1, contention={"trials": 2})
    two = _study(root / "two-threads", framework=["torch", "mxnet"], threads_per_rank=2)
    return one, two


def test_two_machines_compared_on_what_they_share(studies, tmp_path):
    one, two = studies
    proc = subprocess.run(
        [str(DLSCALE), "compare", str(one), str(two), "-o", str(tmp_path / "out")],
        text=True,
        capture_output=True,
        cwd=tmp_path,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    md = (tmp_path / "out" / "compare.md").read_text()
    table = pd.read_csv(tmp_path / "out" / "compare.csv")
    # the settings that differ come before any ratio
    assert md.index("threads_per_rank: one-thread 1; two-threads 2") < md.index("## Throughput on each machine")
    assert "AMD" in md or "GiB memory" in md  # each study's hardware
    # shared work: torch tinynet at 1 and 2 ranks, on both machines; mxnet only in the second study
    assert sorted(set(zip(table["framework"], table["ranks"]))) == [("torch", 1), ("torch", 2)]
    assert set(table["study"]) == {"one-thread", "two-threads"} and len(table) == 4
    only = "mxnet tinynet overlap horovod 1 rank(s) on 1 node(s), mxnet tinynet overlap horovod 2 rank(s) on 1 node(s)"
    assert f"- two-threads: {only}" in md
    theirs = table[table["study"] == "two-threads"]
    assert (theirs["ratio_ci_lo"] > 0).all() and (theirs["ratio_ci_lo"] <= theirs["ratio"]).all()
    assert set(theirs["verdict"]) <= {"faster", "slower", "equal", "unresolved"}
    assert (table.loc[table["study"] == "one-thread", "verdict"] == "reference").all()
    assert (table["img_per_s_per_device"] * table["ranks"] - table["img_per_s"]).abs().max() < 1e-9


def test_a_folder_that_is_not_a_study_is_named(tmp_path):
    proc = subprocess.run([str(DLSCALE), "compare", str(tmp_path), str(tmp_path)], capture_output=True, text=True)
    assert proc.returncode == 2 and f"{tmp_path}: no summary.csv" in proc.stderr


def test_nothing_shared_says_so(tmp_path):
    def study(name, framework):
        row = {k: "x" for k in compare.WORK} | {"framework": framework, "nodes": 1, "ranks_per_node": 1, "ranks": 1}
        row |= {k: 1 for k in compare.SETTINGS} | {"repeats_ok": 2, "throughput_img_per_s": 10.0}
        row |= {"throughput_se": 1.0, "throughput_img_per_s_ci_lo": 8.0, "throughput_img_per_s_ci_hi": 12.0}
        return {"name": name, "folder": name, "summary": pd.DataFrame([row]), "hosts": {}, "dates": ("", "")}

    studies = [study("a", "torch"), study("b", "jax")]
    compared = compare.table(studies)
    assert compared.empty
    md = compare.report(studies, compared, tmp_path / "c.md").read_text()
    assert "No configuration was measured by every study" in md and "- b: jax x x x 1 rank(s) on 1 node(s)" in md


def test_a_setting_a_study_varies_itself_is_matched_not_picked(tmp_path):
    """A study with threads_per_rank [1, 2] against one with 1: its 1-thread rows are compared, its
    2-thread rows listed as its own (not one of the two taken for the configuration)."""

    def study(name, rates):
        rows = []
        for threads, rate in rates.items():
            row = {k: "x" for k in compare.WORK} | {"framework": "torch", "nodes": 1, "ranks_per_node": 1, "ranks": 1}
            row |= {k: 1 for k in compare.SETTINGS} | {"threads_per_rank": threads, "repeats_ok": 3}
            row |= {"throughput_img_per_s": rate, "throughput_se": 0.1}
            row |= {"throughput_img_per_s_ci_lo": rate - 0.4, "throughput_img_per_s_ci_hi": rate + 0.4}
            rows.append(row)
        return {"name": name, "folder": name, "summary": pd.DataFrame(rows), "hosts": {}, "dates": ("", "")}

    studies = [study("both", {2: 20.0, 1: 10.0}), study("one", {1: 5.0})]
    compared = compare.table(studies)
    assert list(compared["threads_per_rank"]) == [1, 1]
    assert compared.set_index("study").loc["one", "ratio"] == pytest.approx(0.5)
    md = compare.report(studies, compared, tmp_path / "c.md").read_text()
    assert "| threads_per_rank |" in md and "- both: torch x x x threads_per_rank=2 1 rank(s) on 1 node(s)" in md


# --- dlscale plan: the model asked about candidate hardware -------------------------------------

CANDIDATES = {
    "links": {"10GbE": {"gbit_s": 10, "latency_us": 25}},
    "candidates": [
        {"name": "one 2-thread device", "device_study": "TWO", "price": 2},
        {"name": "two 1-thread devices", "devices_per_node": 2, "price": 2},
        {"name": "four nodes over 10GbE", "nodes": 4, "link": "10GbE", "price": 4},
        {"name": "a device twice as fast", "compute_factor": 2.0},
        {"name": "two devices twice as fast", "compute_factor": 2.0, "devices_per_node": 2},
        {"name": "two devices that share badly", "devices_per_node": 2, "contention": 1.5},
    ],
}


def test_plan_predicts_candidates_saying_what_was_measured_and_what_assumed(studies, tmp_path):
    one, two = studies
    spec = yaml.safe_load(yaml.safe_dump(CANDIDATES))
    spec["candidates"][0]["device_study"] = str(two)
    (tmp_path / "candidates.yaml").write_text(yaml.safe_dump(spec))
    argv = [str(DLSCALE), "plan", str(one), "--candidates", "candidates.yaml", "-o", "out"]
    proc = subprocess.run(argv, capture_output=True, text=True, cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr[-3000:]
    table = pd.read_csv(tmp_path / "out" / "plan.csv").set_index("candidate")
    assert list(table.index) == [c["name"] for c in CANDIDATES["candidates"]]  # torch tinynet only (its 1-rank runs)
    row = table.loc["two 1-thread devices"]
    # the study's own 2-rank runs were predicted the same way: model.csv's prediction, from the same inputs
    model = pd.read_csv(one / "model.csv").dropna(subset=["predicted_iteration_s"])
    assert row.predicted_iteration_s == pytest.approx(model["predicted_iteration_s"].iloc[0], rel=1e-9)
    assert row.model_error == pytest.approx(model["error_iteration"].abs().median())
    assert row.link_from.startswith("measured: one-thread's allreduce sweep on 1 node(s) x 2")
    # sharing the node: the study's own calibration for its own device, a stated factor, else 1 said to be assumed
    slowdown = pd.read_csv(one / "contention.csv")["slowdown"].item()
    assert row.compute_slowdown == pytest.approx(slowdown) and model["compute_slowdown"].iloc[0] == row.compute_slowdown
    assert row.slowdown_from == "measured: one-thread's contention.csv, 2 ranks per node"
    stated, faster = table.loc["two devices that share badly"], table.loc["two devices twice as fast"]
    assert (stated.compute_slowdown, stated.slowdown_from) == (1.5, "stated: 1.5 at 2 per node")
    assert faster.compute_slowdown == 1.0 and faster.slowdown_from.startswith("assumed: 1 (2 devices per node")
    assert table.loc["four nodes over 10GbE", "slowdown_from"] == "none: one device per node"
    assert (
        table.loc["one 2-thread device", "compute_from"] == "measured: two-threads's 1-rank runs (2 thread(s) per rank)"
    )
    assert table.loc["four nodes over 10GbE", "link_from"].startswith("stated: 10GbE (10 Gbit/s, 25 us)")
    assert table.loc["a device twice as fast", "compute_from"].startswith(
        "assumed: one-thread's 1-rank phases (1 thread(s) per rank) / 2"
    )
    fast, base = table.loc["a device twice as fast"], table.loc["two 1-thread devices"]
    assert fast.predicted_img_per_s > 0 and base.predicted_efficiency <= 1.0
    assert table.loc["four nodes over 10GbE", "img_per_s_per_price"] == pytest.approx(
        table.loc["four nodes over 10GbE", "predicted_img_per_s"] / 4
    )
    md = (tmp_path / "out" / "plan.md").read_text()
    assert "## tinynet in torch" in md and " img/s predicted" not in md and "gives" in md


def test_a_stated_faster_device_has_its_gradients_ready_as_much_sooner_as_its_backward_ends():
    # compute_factor 2 halves backward (0.2 -> 0.1 s); the gradients stay at their fractions of it (0.5, 1), each
    # allreduce 0.04 s: the first hides behind backward, the second is exposed. Left at 0.1 and 0.2 s, both
    # would wait for backward's end and 0.08 s would show.
    ident = {"framework": "torch", "model": "alexnet", "allreduce_schedule": "overlap", "allreduce_library": "horovod"}
    ident |= {"layout": "best", "timing": "native", "batch_size": 8, "loader_workers": 1, "image_size": 64}
    ident |= {"classes": 1000, "threads_per_rank": 1, "precision": "fp32"}
    phases = {"io_s": 0.0, "h2d_s": 0.0, "forward_s": 0.1, "backward_s": 0.2, "update_s": 0.0}
    base = {"sizes": [100, 100], "ready": [0.1, 0.2], "threshold": 100, "cycle": 1e-3, "base": phases}
    cost = model.Cost(lambda m: 4e-4 * m)
    study = {"name": "s", "bases": {tuple(ident[k] for k in BASELINE_KEYS): base}, "slowdowns": {}}
    study |= {"costs": {(1, 2, "horovod"): cost}, "node_cpus": None, "model": pd.DataFrame({"error_iteration": []})}
    candidate = {"name": "fast", "nodes": 1, "devices_per_node": 2, "link": plan.MEASURED, "compute_factor": 2.0}
    (row,) = plan.predict_candidate(study, candidate | {"price": None}, {})
    assert row["predicted_iteration_s"] == pytest.approx(0.15 + 0.04, abs=2e-3)  # compute, then the second's 0.04


def test_plan_without_candidates_predicts_the_studys_own_placements(studies, tmp_path):
    one, _ = studies
    proc = subprocess.run([str(DLSCALE), "plan", str(one), "-o", str(tmp_path)], capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr[-3000:]
    table = pd.read_csv(tmp_path / "plan.csv")
    assert sorted(zip(table["nodes"], table["devices_per_node"])) == [(1, 1), (1, 2)]


@pytest.mark.parametrize(
    "candidate, message",
    [
        ({"name": "x", "nodes": 0}, "candidate 'x': nodes must be a whole number >= 1"),
        ({"name": "x", "link": "nosuch"}, "link 'nosuch' is neither `measured` nor one of `links`"),
        ({"name": "x", "colour": "red"}, "unknown key(s) ['colour']"),
        ({"name": "x", "compute_factor": 2, "device_study": "s"}, "device_study or compute_factor, not both"),
        ({"nodes": 2}, "needs a `name`"),
        (
            {"name": "x", "contention": 0},
            "contention (a rank's compute slowdown beside the others on its node) must be > 0",
        ),
    ],
)
def test_a_bad_candidate_is_named(studies, tmp_path, candidate, message):
    one, _ = studies
    (tmp_path / "c.yaml").write_text(yaml.safe_dump({"candidates": [candidate]}))
    proc = subprocess.run(
        [str(DLSCALE), "plan", str(one), "--candidates", str(tmp_path / "c.yaml")],
        capture_output=True,
        text=True,
        cwd=tmp_path,
    )
    assert proc.returncode == 2 and message in proc.stderr, proc.stderr


def test_the_guides_candidates_file_is_valid(tmp_path):
    from dlscale.analysis import plan

    guide = (ROOT / "docs" / "guides" / "hardware.md").read_text()
    block = guide.split("```yaml\n", 1)[1].split("```", 1)[0]
    (tmp_path / "c.yaml").write_text(block)
    links, candidates = plan.read_candidates(tmp_path / "c.yaml", study=None)
    assert set(links) == {"10GbE"} and [c["name"] for c in candidates][:2] == ["one big device", "two small devices"]
    assert candidates[1]["devices_per_node"] == 2 and candidates[3]["compute_factor"] == 2.0


def test_the_docs_example_is_a_study_to_compare_with_and_plan_from(tmp_path):
    """docs/example carries the tables compare and plan read (not its runs' records)."""
    from dlscale.analysis import plan

    example = compare.load(ROOT / "docs" / "example")
    assert example["name"] == "example" and len(example["summary"]) == 16 and example["hosts"]
    assert not list((ROOT / "docs" / "example").glob("runs/"))
    argv = [str(DLSCALE), "plan", str(ROOT / "docs" / "example"), "-o", str(tmp_path / "p")]
    proc = subprocess.run(argv, capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr[-2000:]
    loaded = plan.load(ROOT / "docs" / "example")
    assert loaded["slowdowns"]  # its contention calibration, measured
    # its node's CPUs and its sweep's cores: two 1-thread devices on its node have no CPU to spare
    assert loaded["node_cpus"] == 2 and loaded["costs"][(1, 2, "horovod")].cores > 0.5
    two = {"devices_per_node": 2, "compute_factor": 1}
    assert plan._rate(loaded, two, 1, loaded["costs"][(1, 2, "horovod")]) < 0.6  # the example's node: 2 CPUs
    assert plan._rate(loaded, {**two, "compute_factor": 2.0}, 1, loaded["costs"][(1, 2, "horovod")]) == 1.0
    # a candidate whose link was measured between nodes of one CPU each: those nodes' CPUs, not the study's
    one_cpu, apart = {**loaded, "node_cpus": 1}, {"devices_per_node": 1, "compute_factor": 1}
    assert plan._rate(loaded, apart, 1, loaded["costs"][(1, 2, "horovod")]) == 1.0
    assert plan._rate(loaded, apart, 1, loaded["costs"][(1, 2, "horovod")], one_cpu) < 0.6
    assert "measured: example's contention.csv" in (tmp_path / "p" / "plan.md").read_text()
