"""dlscale as a user installs it: a wheel built from the repository holds the package and nothing
else at top level (the workflow inside it), and a study is a folder of its own: `dlscale init DIR`
then `dlscale run DIR` from anywhere runs the packaged workflow there, nothing in the checkout."""

import os
import re
import shutil
import subprocess
import sys
import tarfile
import zipfile

import pytest
import yaml

import dlscale
from dlscale.runtime import config as cfg
from tests.conftest import ROOT, SMALL_MATMUL

SHIPPED = ["Snakefile", "rules/runs.smk", "config/schema.yaml", "config/config.yaml", "report/workflow.rst"]


COMMIT = subprocess.run(["git", "-C", str(ROOT), "describe", "--always", "--dirty"], capture_output=True, text=True)


@pytest.fixture(scope="module")
def dist(tmp_path_factory):
    """The sdist and the wheel of the repository's tracked files as a release builds them (`python -m
    build`, contributing.md), from a copy (setuptools builds in the tree; the copy is no checkout, so
    the commit comes from $DLSCALE_BUILD_COMMIT as a release's would come from git)."""
    out, source = tmp_path_factory.mktemp("dist"), tmp_path_factory.mktemp("source")
    tracked = subprocess.run(["git", "-C", str(ROOT), "ls-files", "-z"], capture_output=True, check=True).stdout
    for name in tracked.decode().split("\0"):
        if name and (ROOT / name).is_file() and not (ROOT / name).is_symlink():
            (source / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(ROOT / name, source / name)
    env = {**os.environ, "DLSCALE_BUILD_COMMIT": COMMIT.stdout.strip()}
    argv = [sys.executable, "-m", "build", "--no-isolation", "--outdir", str(out), str(source)]
    proc = subprocess.run(argv, capture_output=True, text=True, env=env)
    assert proc.returncode == 0, proc.stderr[-3000:]
    (sdist,) = out.glob("dlscale-*.tar.gz")
    (wheel,) = out.glob("dlscale-*.whl")
    return sdist, wheel


@pytest.fixture(scope="module")
def wheel(dist):
    return dist[1]


def test_the_release_files_pass_twine_check_and_the_sdist_holds_the_source(dist):
    proc = subprocess.run([sys.executable, "-m", "twine", "check", "--strict", *map(str, dist)], capture_output=True)
    assert proc.returncode == 0, proc.stdout[-3000:]
    names = {n.split("/", 1)[1] for n in tarfile.open(dist[0]).getnames() if "/" in n}
    assert {"setup.py", "pyproject.toml", "dlscale/cli.py", "dlscale/workflow/Snakefile", "dlscale/BUILD"} <= names
    assert dist[0].name == f"dlscale-{dlscale.__version__}.tar.gz"


def test_the_changelogs_newest_entry_is_the_packages_version():
    entries = re.findall(r"^## (\S+) \(", (ROOT / "docs" / "changelog.md").read_text(), re.M)
    assert entries[0] == dlscale.__version__, entries
    wheel = f"dlscale-{dlscale.__version__}-py3-none-any.whl"  # the install the docs show
    assert wheel in (ROOT / "docs" / "getting-started.md").read_text()


def _user_env():
    """The environment of a user's shell: nothing of the checkout on the path."""
    return {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV")}


def test_the_wheel_holds_dlscale_only_with_its_workflow_and_commit(wheel):
    """The package alone (no tests, no docs, no bench) with what a study needs from it: the
    workflow, the shipped configs, hostfiles and cluster profiles; and the commit it was built from."""
    archive = zipfile.ZipFile(wheel)
    names = archive.namelist()
    assert {n.split("/")[0] for n in names} == {"dlscale", wheel.name.split("-py3")[0] + ".dist-info"}
    for part in SHIPPED:
        assert f"dlscale/workflow/{part}" in names, part
    configs = {p.name for p in (ROOT / "config").glob("*.yaml")}
    assert {f"dlscale/workflow/config/{c}" for c in configs} <= set(names)
    assert {"dlscale/workflow/hostfiles/localhost", "dlscale/workflow/profiles/slurm/config.yaml"} <= set(names)
    assert not [n for n in names if "/tests/" in n or n.startswith(("tests/", "docs/", "bench/"))]
    assert archive.read("dlscale/BUILD").decode().strip() == COMMIT.stdout.strip()


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
    # with no MPI on the PATH the first command cannot build the environment: it says what to install
    (tmp_path / "bin").mkdir()
    proc = subprocess.run(
        [str(venv / "bin" / "dlscale"), "check-config"],
        capture_output=True,
        text=True,
        cwd=tmp_path,
        env={**_user_env(), "PATH": str(tmp_path / "bin")},
    )
    assert proc.returncode == 2 and "Traceback" not in proc.stderr, proc.stderr
    assert "MPI not found" in proc.stderr and "apt-get install openmpi-bin libopenmpi-dev" in proc.stderr


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


SHRINK = {
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
    "matmul_size": SMALL_MATMUL,
}


def test_every_command_from_the_wheel_in_an_empty_venv(wheel, tmp_path):
    """A user's install: the wheel alone in an empty venv (no dependency), its `dlscale` run from
    another folder. Each command that needs the workload environment builds it (here: finds it
    built) and re-runs itself there; a shrunk study runs in its own folder; no command ends in a
    traceback."""
    venv = tmp_path / "empty"
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
    pip = [str(venv / "bin" / "python"), "-m", "pip", "install", "--no-deps", "--no-index", "--quiet", str(wheel)]
    subprocess.run(pip, check=True, env=_user_env())
    elsewhere, study = tmp_path / "elsewhere", tmp_path / "study"
    elsewhere.mkdir()
    (elsewhere / "shrink.yaml").write_text(yaml.safe_dump(SHRINK))

    def dlscale(*argv, cwd=elsewhere):
        proc = subprocess.run(
            [str(venv / "bin" / "dlscale"), *argv], capture_output=True, text=True, cwd=cwd, env=_user_env()
        )
        assert "Traceback" not in proc.stderr + proc.stdout, (argv, proc.stderr[-4000:])
        assert proc.returncode == 0, (argv, proc.stderr[-4000:])
        return proc

    assert re.fullmatch(r"dlscale \S+ \(commit .+\)\n", dlscale("--version").stdout)
    dlscale("init", str(study))
    assert "running in the workload environment" in dlscale("check-config", cwd=study).stderr
    dlscale("run", str(study), "--configfile", "shrink.yaml", "--", "--nolock")
    report = (study / "results" / "report.md").read_text()
    assert "dlscale commit `" in report and "installed)`" in report and report.startswith("# dlscale: shrink")
    assert not list(elsewhere.glob("results")) and sorted(p.name for p in elsewhere.iterdir()) == ["shrink.yaml"]
    dlscale("report", str(study), "--configfile", "shrink.yaml", "--", "--nolock")
    assert "no failed runs" in dlscale("retry", str(study), "--configfile", "shrink.yaml").stdout
    dlscale("unlock", str(study))
    assert "torch:" in dlscale("env", "check", "--configfile", str(elsewhere / "shrink.yaml"), cwd=study).stdout
    dlscale("plan", str(study / "results"), "-o", "plan")
    dlscale("compare", str(study / "results"), str(ROOT / "docs" / "example"), "-o", "compare")
    assert (elsewhere / "plan" / "plan.md").is_file() and (elsewhere / "compare" / "compare.md").is_file()
