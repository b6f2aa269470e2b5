"""Stopping the pipeline and getting it going again: analysis steps (which Snakemake runs in threads
of its own process) stop on a signal and after their time limit, naming themselves; the lock a
killed snakemake leaves is removed by one command, and by `snakemake --unlock` itself."""

import os
import re
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest
import yaml

from dlscale.core import paths
from dlscale.runtime import rule, signals
from tests import steps_probe
from tests.conftest import ROOT, SNAKEMAKE, tiny_config

LOCKS = ROOT / ".snakemake" / "locks"


def test_an_analysis_step_past_its_time_limit_is_killed_and_named():
    started = time.time()
    with pytest.raises(
        RuntimeError,
        match=r"rule slow did not finish within 2 s and was killed "
        r"\(config key step_timeout_s\)",
    ):
        rule.step("slow", steps_probe.sleep, ([], [], {"seconds": 300}, [], []), timeout_s=2)
    assert time.time() - started < 2 + 10


def test_a_step_gets_its_rules_lists_as_snakemake_hands_them(tmp_path):
    from snakemake.iocontainers import Namedlist

    inputs = Namedlist(fromdict={"tidy": str(tmp_path / "t.csv"), "figures": [str(tmp_path / "a.png")]})
    out = tmp_path / "seen.txt"
    params = Namedlist(fromdict={"settings": '{"a": 1}'})
    resources = Namedlist(fromdict={"_cores": 1, "run_timeout_s": 2.5})
    rule.step("write", steps_probe.write_what_it_got, (inputs, [str(out)], params, [], resources), timeout_s=60)
    assert out.read_text() == f'{tmp_path / "t.csv"} {[str(tmp_path / "a.png")]} 2 {{"a": 1}} 2.5'


# A stand-in for Snakemake's process: its signal handlers forwarded as the Snakefile's onstart does,
# an analysis step running in one of its threads, the main thread waiting for it.
PIPELINE = textwrap.dedent("""
    import threading, time
    from dlscale.runtime import rule, signals
    from tests import steps_probe
    signals.forward_signals()
    args = ("stuck", steps_probe.sleep, ([], [], {"seconds": 600}, [], []))
    step = threading.Thread(target=rule.step, args=args, kwargs={"timeout_s": 900})
    step.start()
    print("started", flush=True)
    while step.is_alive():
        time.sleep(0.1)
""")


@pytest.mark.timeout(120)
@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT])
def test_a_signal_stops_a_running_analysis_step_within_seconds(sig):
    proc = subprocess.Popen([sys.executable, "-c", PIPELINE], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    assert proc.stdout.readline() == "started\n"
    deadline = time.time() + 30
    while not _steps_of(proc.pid) and time.time() < deadline:
        time.sleep(0.1)
    (step,) = _steps_of(proc.pid)
    time.sleep(1)  # past its start-up, into the step
    sent = time.time()
    os.kill(proc.pid, sig)
    proc.wait(timeout=30)
    while _alive(step) and time.time() - sent < 10:
        time.sleep(0.05)
    assert not _alive(step) and time.time() - sent < 10


def _alive(pid):
    """Running (a zombie waiting for init to reap it has stopped)."""
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


def _steps_of(pid):
    return signals.rules_processes(pid)


def _study(tmp_path, **overrides):
    conf = tiny_config(
        tmp_path,
        framework=["torch"],
        ranks_per_node=[1],
        iterations=2,
        profile_iterations=1,
        logs=str(tmp_path / "logs"),
        **overrides,
    )
    path = tmp_path / "study.yaml"
    path.write_text(yaml.safe_dump(conf))
    return conf, path


@pytest.mark.timeout(300)
def test_the_pipeline_stops_naming_the_step_past_its_time_limit(tmp_path):
    # no analysis step, not even the quickest, ends within a millisecond: the first one is stopped
    conf, path = _study(tmp_path, step_timeout_s=0.001)
    proc = subprocess.run(
        SNAKEMAKE + ["--configfile", str(path)],
        cwd=ROOT,
        capture_output=True,
        text=True,
    )
    assert proc.returncode != 0
    stopped = re.search(
        r"rule (\w+) did not finish within 0.001 s and was killed \(config key step_timeout_s\)",
        proc.stdout + proc.stderr,
    )
    assert stopped, proc.stderr[-3000:]
    # whichever analysis step Snakemake started first (any rule but those that bound themselves)
    rules = "".join(p.read_text() for p in (ROOT / "dlscale" / "workflow" / "rules").glob("*.smk"))
    steps = set(re.findall(r"^\s*(?:rule|checkpoint) (\w+):", rules, re.M)) - {"run", "allreduce", "replay"}
    assert {"tidy", "peak", "flops"} <= steps and stopped.group(1) in steps, stopped.group(1)
    assert not (Path(conf["results"]) / paths.TABLES["summary"]).exists()


@pytest.mark.timeout(300)
def test_a_stale_lock_is_explained_and_removed_by_one_command(tmp_path):
    if LOCKS.is_dir() and any(LOCKS.iterdir()):
        pytest.skip(f"{LOCKS} holds a lock already: a study may be running in this checkout")
    conf, path = _study(tmp_path)
    run = [sys.executable, "-m", "snakemake", "--cores", "2", "--configfile", str(path)]  # with its lock
    proc = subprocess.Popen(run, cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)
    try:
        deadline = time.time() + 120
        while not (LOCKS.is_dir() and any(LOCKS.iterdir())) and time.time() < deadline:
            time.sleep(0.05)
        assert any(LOCKS.iterdir()), "snakemake never took its lock"
        unlock = [sys.executable, "-m", "dlscale", "unlock"]
        alive = subprocess.run(unlock, cwd=ROOT, capture_output=True, text=True)
        assert alive.returncode == 1 and "its lock is not stale" in alive.stderr  # a live study keeps its lock
    finally:
        os.killpg(proc.pid, signal.SIGKILL)  # as a power loss or the out-of-memory killer would
        proc.wait()
    locked = subprocess.run(run, cwd=ROOT, capture_output=True, text=True)
    assert locked.returncode != 0 and "LockException" in locked.stderr + locked.stdout
    removed = subprocess.run(unlock, cwd=ROOT, capture_output=True, text=True)
    assert removed.returncode == 0 and removed.stdout.startswith("removed "), removed.stderr
    assert not any(LOCKS.iterdir())
    again = subprocess.run(unlock, cwd=ROOT, capture_output=True, text=True)
    assert again.returncode == 0 and again.stdout.startswith("no lock in ")
    rerun = subprocess.run(run, cwd=ROOT, capture_output=True, text=True)
    assert rerun.returncode == 0, rerun.stderr[-3000:]
    # `dlscale run` clears a stale lock itself, in one line, and goes on
    LOCKS.mkdir(parents=True, exist_ok=True)
    (LOCKS / "0.input.lock").write_text(str(path) + "\n")
    dlscale_run = [sys.executable, "-m", "dlscale", "run", "--configfile", str(path)]
    cleared = subprocess.run(dlscale_run, cwd=ROOT, capture_output=True, text=True)
    assert cleared.returncode == 0, cleared.stderr[-3000:]
    assert cleared.stdout.startswith("dlscale: removed a stale Snakemake lock (1 file(s)")


def test_snakemake_unlock_itself_works():
    if LOCKS.is_dir() and any(LOCKS.iterdir()):
        pytest.skip(f"{LOCKS} holds a lock already: a study may be running in this checkout")
    # it failed with "Workflow requires a total number of cores to be defined" (the rules' threads are
    # the workflow's cores): the workflow profile gives it the cores
    proc = subprocess.run([sys.executable, "-m", "snakemake", "--unlock"], cwd=ROOT, capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "Unlocked working directory." in proc.stdout + proc.stderr
