"""dlscale as a user installs it: a wheel built from the repository holds the package and nothing
else at top level (the workflow inside it), and a study is a folder of its own: `dlscale init DIR`
then `dlscale run DIR` from anywhere runs the packaged workflow there, nothing in the checkout."""

import os
import shutil
import subprocess
import sys
import zipfile

import pytest
import yaml

from dlscale.environment import build
from dlscale.runtime import config as cfg
from tests.conftest import ROOT

SHIPPED = ["Snakefile", "rules/runs.smk", "config/schema.yaml", "config/config.yaml", "report/workflow.rst"]


@pytest.fixture(scope="module")
def wheel(tmp_path_factory):
    """The wheel of the repository's tracked files (built from a copy: setuptools builds in the tree)."""
    out, source = tmp_path_factory.mktemp("wheel"), tmp_path_factory.mktemp("source")
    tracked = subprocess.run(["git", "-C", str(ROOT), "ls-files", "-z"], capture_output=True, check=True).stdout
    for name in tracked.decode().split("\0"):
        if name and (ROOT / name).is_file() and not (ROOT / name).is_symlink():
            (source / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(ROOT / name, source / name)
    argv = [sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "--no-index", "-w", str(out)]
    subprocess.run([*argv, str(source)], check=True, capture_output=True, cwd=out)
    (found,) = out.glob("dlscale-*.whl")
    return found


def _user_env():
    """The environment of a user's shell: nothing of the checkout on the path."""
    return {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV")}


def test_the_wheel_holds_dlscale_only_with_its_workflow(wheel):
    names = zipfile.ZipFile(wheel).namelist()
    assert {n.split("/")[0] for n in names} == {"dlscale", wheel.name.split("-py3")[0] + ".dist-info"}
    for part in SHIPPED:
        assert f"dlscale/workflow/{part}" in names, part


def test_installed_in_an_empty_venv_it_adds_one_top_level_name(wheel, tmp_path):
    venv = tmp_path / "empty"
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
    site = next(venv.glob("lib/python*/site-packages"))
    before = {p.name for p in site.iterdir()}
    pip = [str(venv / "bin" / "python"), "-m", "pip", "install", "--no-deps", "--no-index", "--quiet", str(wheel)]
    subprocess.run(pip, check=True, env=_user_env())
    added = {p.name for p in site.iterdir()} - before
    assert {a for a in added if not a.endswith(".dist-info")} == {"dlscale"}, added
    assert (venv / "bin" / "dlscale").is_file()


def test_init_writes_a_study_that_validates_and_refuses_to_overwrite(tmp_path, monkeypatch):
    from dlscale.cli import main

    assert main(["init", str(tmp_path / "s"), "--from", "emulated"]) == 0
    text = (tmp_path / "s" / cfg.STUDY_CONFIG).read_text()
    assert text.startswith("# This study's config: emulated") and "rate_mbit: 500" in text
    assert (tmp_path / "s" / "hostfiles" / "localhost").is_file() and (tmp_path / "s" / "profiles" / "slurm").is_dir()
    assert not (tmp_path / "s" / "profiles" / "default").exists()  # the packaged workflow's own profile
    monkeypatch.chdir(tmp_path / "s")
    assert cfg.layered()["emulate"]["rate_mbit"] == 500 and cfg.title(cfg.layered(), []) == "dlscale: s"
    assert main(["init", str(tmp_path / "s")]) == 2  # a study already: nothing overwritten
    assert main(["init", str(tmp_path / "t"), "--from", "nosuch"]) == 2


def test_init_layers_several_shipped_configs_in_order(tmp_path):
    text = cfg.study_template(["slurm", "slurm-emulated"])
    merged = yaml.safe_load(text)
    assert merged["nodes"] == [1, 2] and merged["results"] == "results/slurm-emulated"
    assert merged["launcher"] == yaml.safe_load((ROOT / "config" / "slurm.yaml").read_text())["launcher"]


def test_a_study_folder_runs_from_the_installed_wheel(wheel, tmp_path):
    """The wheel installed over the workload environment (as .venv installs the checkout): init a
    folder, run a shrunk study in it from another folder; results, logs and data land in it."""
    venv = tmp_path / "venv"
    build.link(build.env_dir(), venv, wheel=wheel)
    dlscale = [str(venv / "bin" / "dlscale")]
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    env = _user_env()
    where = subprocess.run(
        [str(venv / "bin" / "python"), "-c", "import dlscale; print(dlscale.__file__)"],
        capture_output=True,
        text=True,
        cwd=elsewhere,
        env=env,
    )
    assert str(venv) in where.stdout, where  # the wheel's, not the checkout's
    study = tmp_path / "study"
    subprocess.run([*dlscale, "init", str(study)], check=True, cwd=elsewhere, env=env)
    shrink = elsewhere / "shrink.yaml"
    shrink.write_text(
        yaml.safe_dump(
            {
                "framework": ["torch"],
                "model": ["tinynet"],
                "ranks_per_node": [1, 2],
                "repeats": 1,
                "warmup": 1,
                "iterations": 2,
                "batch_size": [4],
                "image_size": 64,
                "classes": 10,
                "data": {"kind": "synthetic"},
                "loader_workers": [0],
                "allreduce_max_bytes": 1 << 16,
            }
        )
    )
    run = subprocess.run(
        [*dlscale, "run", str(study), "--configfile", "shrink.yaml", "--", "--nolock"],
        capture_output=True,
        text=True,
        cwd=elsewhere,
        env=env,
    )
    assert run.returncode == 0, run.stderr[-4000:]
    report = (study / "results" / "report.md").read_text()
    assert "dlscale commit `none: dlscale 0.1.0 installed, not a checkout`" in report and report.startswith(
        "# dlscale: shrink"
    )
    assert (study / "logs").is_dir() and (study / ".snakemake").is_dir()
    assert not list(elsewhere.glob("results")) and sorted(p.name for p in elsewhere.iterdir()) == ["shrink.yaml"]
