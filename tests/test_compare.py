"""`dlscale compare` on two real finished studies (shrunk) that differ in threads per rank and share
only part of their work; and its tables on known data."""

import subprocess

import pandas as pd
import pytest
import yaml

from dlscale.analysis import compare
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
    one = _study(root / "one-thread", framework=["torch"], threads_per_rank=1)
    two = _study(root / "two-threads", framework=["torch", "mxnet"], threads_per_rank=2)
    return one, two


def test_two_machines_compared_on_what_they_share(studies, tmp_path):
    one, two = studies
    proc = subprocess.run([str(DLSCALE), "compare", str(one), str(two), "-o", str(tmp_path / "out")], text=True,
                          capture_output=True, cwd=tmp_path)  # fmt: skip
    assert proc.returncode == 0, proc.stderr[-3000:]
    md = (tmp_path / "out" / "compare.md").read_text()
    table = pd.read_csv(tmp_path / "out" / "compare.csv")
    # the settings that differ come before any ratio
    assert md.index("threads_per_rank: one-thread 1; two-threads 2") < md.index("## Throughput on each machine")
    assert "AMD" in md or "GiB memory" in md  # each study's hardware
    # shared work: torch tinynet at 1 and 2 ranks, on both machines; mxnet only in the second study
    assert sorted(set(zip(table["framework"], table["ranks"]))) == [("torch", 1), ("torch", 2)]
    assert set(table["study"]) == {"one-thread", "two-threads"} and len(table) == 4
    assert "- two-threads: mxnet tinynet overlap horovod 1 rank(s), mxnet tinynet overlap horovod 2 rank(s)" in md
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
    assert "No configuration was measured by every study" in md and "- b: jax x x x 1 rank(s)" in md
