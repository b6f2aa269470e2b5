"""The `dlscale` command, as the environment's overlay (.venv, made by ./bootstrap.sh) installs it:
every subcommand answers --help, and the ones that run the pipeline run it in this checkout."""

import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from dlscale.cli import main
from tests.conftest import ROOT

DLSCALE = Path(sys.executable).parent / "dlscale"
SUBCOMMANDS = ["init", "run", "report", "env", "check-config", "launch", "unlock", "retry", "emulate"]


def dlscale(*args, **kwargs):
    return subprocess.run([str(DLSCALE), *args], capture_output=True, text=True, **kwargs)


def test_the_environment_installs_the_checkout_and_its_command():
    assert DLSCALE.is_file(), f"{DLSCALE}: run ./bootstrap.sh (it installs this checkout into .venv)"
    import dlscale as package

    assert Path(package.__file__).resolve().parent.parent == ROOT  # this checkout, editable
    proc = dlscale("--help")
    assert proc.returncode == 0 and proc.stdout.startswith("usage: dlscale")
    for name in SUBCOMMANDS:
        assert name in proc.stdout.split("\n\n")[0] + proc.stdout, name


@pytest.mark.parametrize("name", SUBCOMMANDS)
def test_every_subcommand_has_help(name):
    proc = dlscale(name, "--help")
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.startswith(f"usage: dlscale {name}")
    assert "-h, --help" in proc.stdout


def test_python_m_dlscale_is_the_same_command():
    proc = subprocess.run([sys.executable, "-m", "dlscale", "unlock", "--help"], capture_output=True, text=True)
    assert proc.returncode == 0 and proc.stdout == dlscale("unlock", "--help").stdout


def test_run_starts_the_pipeline_in_the_study_folder_it_names_from_anywhere(tmp_path):
    overlay = tmp_path / "mine.yaml"  # named relative to where the command is typed
    overlay.write_text(yaml.safe_dump({"framework": ["torch"], "results": str(tmp_path / "results")}))
    proc = dlscale("run", str(ROOT), "--configfile", "mine.yaml", "--config", "repeats=1", "--", "-n", cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "This was a dry-run" in proc.stdout and str(tmp_path / "results") in proc.stdout
    assert f"Working directory: {ROOT}" in proc.stdout
    assert "tensorflow" not in proc.stdout  # the overlay was read


def test_a_folder_that_is_not_a_study_is_refused_naming_init(tmp_path):
    for command in (["run"], ["run", str(tmp_path)], ["report", str(tmp_path)], ["retry", str(tmp_path)]):
        proc = dlscale(*command, cwd=tmp_path)
        assert proc.returncode == 2 and "is not a study folder" in proc.stderr and "dlscale init" in proc.stderr


def test_run_and_report_stop_on_a_bad_config_naming_the_key(tmp_path, capsys):
    for name in ("run", "report"):
        assert main([name, "--config", "repeats=0"]) == 2
        assert "config key 'repeats'" in capsys.readouterr().err


def test_the_overlay_is_remade_and_a_folder_it_did_not_make_is_left_alone(tmp_path):
    from dlscale.environment import build

    env = build.env_dir()
    overlay = tmp_path / "venv"
    build.link(env, overlay)
    build.link(env, overlay)  # again: remade in place
    proc = subprocess.run([str(overlay / "bin" / "dlscale"), "check-config"], cwd=ROOT, capture_output=True, text=True)
    assert proc.returncode == 0 and ": ok, " in proc.stdout, proc.stderr
    mine = tmp_path / "mine"
    mine.mkdir()
    (mine / "notes.txt").write_text("keep")
    with pytest.raises(build.EnvError, match="not this project's environment overlay"):
        build.link(env, mine)
    assert (mine / "notes.txt").read_text() == "keep"


def test_env_works_on_a_bare_python_as_bootstrap_runs_it():
    """./bootstrap.sh (and a wheel installed into a site's python) runs `dlscale env` before the
    environment with the runtime's packages exists: no site-packages at all here (-S)."""
    code = (
        f"import sys; sys.path.insert(0, {str(ROOT)!r}); from dlscale.cli import main; sys.exit(main(['env', 'path']))"
    )
    proc = subprocess.run([sys._base_executable, "-S", "-c", code], capture_output=True, text=True)
    assert proc.returncode in (0, 1) and "Traceback" not in proc.stderr, proc.stderr
