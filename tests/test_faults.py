"""Fault injection against real MPI jobs and real Snakemake: kill a rank, kill mpirun, signal the
pipeline and the rule's process, break a run folder in every way it can be left; each time the
study completes (or is redone by the next snakemake) and nothing measured is lost."""

import json
import os
import re
import shutil
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pandas as pd
import pytest
import yaml

from dlscale.core import paths
from dlscale.core.vocabulary import ATTEMPT, LOG, STATUS, TIMELINE, records_name, trace_name
from dlscale.runtime import config as cfg
from dlscale.runtime import launch
from tests.conftest import ENV_RECORD, ROOT, SNAKEMAKE, env_record, tiny_config, tiny_run

# Iterations that keep a 2-rank tinynet run going for several seconds on 2 cores, long enough to
# hit it with a signal while it trains.
LONG = 1500
TWO_RANKS = tiny_run(ranks_per_node=2)


def processes(text):
    """Pids of the processes whose command line holds `text`."""
    found = []
    for cmdline in Path("/proc").glob("[0-9]*/cmdline"):
        try:
            if text.encode() in cmdline.read_bytes() and int(cmdline.parent.name) != os.getpid():
                found.append(int(cmdline.parent.name))
        except OSError:
            continue
    return found


def run_rules(pid):
    """The `python -m dlscale.runtime.rule "rule run"` processes below `pid` (not other rules' processes,
    nor another study's on the same machine)."""
    from dlscale.runtime.signals import rules_processes as _rules_processes

    return [
        p for p in _rules_processes(pid) if Path(f"/proc/{p}/cmdline").read_bytes().split(b"\0")[3:4] == [b"rule run"]
    ]


def rank_pid(spec, rank):
    """The pid of MPI rank `rank` of the run whose spec.json is `spec`."""
    for pid in processes(str(spec)):
        try:
            environ = Path(f"/proc/{pid}/environ").read_bytes().split(b"\0")
        except OSError:
            continue
        if f"OMPI_COMM_WORLD_RANK={rank}".encode() in environ:
            return pid
    return None


def wait_for(condition, timeout, what):
    deadline = time.time() + timeout
    while time.time() < deadline:
        value = condition()
        if value:
            return value
        time.sleep(0.2)
    raise AssertionError(f"waited {timeout} s for {what}")


def training(run_dir, lines=20):
    """True once rank 1 of the run has recorded `lines` records."""
    path = Path(run_dir) / records_name(1)
    return path.is_file() and path.read_text().count("\n") >= lines


def study(tmp_path, **overrides):
    """A one-framework tinynet study (1 and 2 ranks) whose folders hold a space and a quote."""
    base = tmp_path / "a study's folder"
    conf = tiny_config(
        tmp_path, framework=["torch"], results=str(base / "results"), logs=str(base / "logs"), **overrides
    )
    path = base / "config.yaml"
    base.mkdir(parents=True)
    path.write_text(yaml.safe_dump(conf))
    return conf, path


def snakemake(path, *args, **kwargs):
    # targets and options before --configfile, which takes every word after it
    return subprocess.run(
        SNAKEMAKE + [*args, "--configfile", str(path)], cwd=ROOT, capture_output=True, text=True, **kwargs
    )


def run_dir(conf, run=TWO_RANKS):
    return Path(conf["results"]) / paths.run_folder(run)


def attempts(conf, run=TWO_RANKS):
    folder = Path(conf["results"]) / paths.attempts(paths.run_path(run))
    return sorted(folder.iterdir()) if folder.is_dir() else []


# -- the run folder in every state it can be left in -------------------------------------------------


@pytest.fixture(scope="module")
def made_runs(tmp_path_factory, base_config_module):
    """One real native (traced) and one real phased (Horovod timeline) 2-rank run."""
    root = tmp_path_factory.mktemp("runs")
    base_config_module.update(results=str(root / "results"), logs=str(root / "logs"), warmup=1, iterations=3)
    made = {}
    for timing in ("native", "phased"):
        run = {**TWO_RANKS, "timing": timing}
        status = launch.launch(base_config_module, run, env_record(run["framework"]))
        assert status["status"] == "ok", status
        made[timing] = run_dir(base_config_module, run)
    return made


@pytest.fixture(scope="module")
def base_config_module():
    conf = yaml.safe_load((ROOT / "config" / "config.yaml").read_text())
    return {**conf, "data": {"kind": "synthetic"}, "loader_workers": [0]}


def _truncate_last_line(d):
    path = d / records_name(1)
    path.write_text(path.read_text()[:-25])


def _garble_a_line(d):
    path = d / records_name(0)
    lines = path.read_text().splitlines()
    lines[2] = lines[2].replace('"', "", 3) + "\x00\xff"
    path.write_text("\n".join(lines) + "\n")


BROKEN = {
    # name: (which run, how it is broken, what the failed row must say)
    "no spec": ("native", lambda d: (d / "spec.json").unlink(), "no spec.json"),
    "no records": ("native", lambda d: [p.unlink() for p in d.glob("rank*.jsonl")], "rank 0 has no records"),
    "missing rank": ("native", lambda d: (d / records_name(1)).unlink(), "rank 1 has no records"),
    "truncated line": ("native", _truncate_last_line, "malformed record line"),
    "garbled line": ("native", _garble_a_line, "malformed record line"),
    "corrupt trace": (
        "native",
        lambda d: (d / trace_name(1)).write_bytes(b"\x1f\x8b garbage"),
        f"{trace_name(1)} unreadable",
    ),
    "corrupt timeline": (
        "phased",
        lambda d: (d / TIMELINE).write_text('[{"name": "ALLREDUCE", "ph": '),
        f"{TIMELINE} unreadable",
    ),
    "corrupt status": ("native", lambda d: (d / STATUS).write_text('{"status": "o'), "status.json unreadable"),
}


def test_every_broken_run_folder_is_a_failed_row_and_the_tables_are_made(made_runs, tmp_path):
    from dlscale.analysis import comparisons, figures, metrics, tidy

    statuses = []
    for name, (timing, breaks, _) in BROKEN.items():
        copy = tmp_path / name.replace(" ", "_") / "results" / paths.run_folder({**TWO_RANKS, "timing": timing})
        shutil.copytree(made_runs[timing], copy)
        breaks(copy)
        statuses.append(copy / STATUS)
    intact = [made_runs[t] / STATUS for t in ("native", "phased")]
    table, runs, _ = tidy.build(intact + statuses)

    assert runs["status"].tolist()[:2] == ["ok", "ok"]
    for (name, (_, _, says)), row in zip(BROKEN.items(), runs.iloc[2:].itertuples()):
        assert row.status == "failed" and says in row.reasons, (name, row.reasons)
        assert (row.framework, row.ranks_per_node) == ("torch", 2), name  # identity kept, from the path if need be
    assert set(table["timing"]) == {"native", "phased"} and len(table) > 0  # only the intact runs' rows
    summary = metrics.summarize(metrics.run_table(table), runs)
    assert summary["repeats_failed"].sum() == len(BROKEN)
    drawn = figures.draw_all(
        summary,
        comparisons.study(summary, metrics.run_table(table)),
        paths.figure_paths(tmp_path / "figures", paths.FIGURE_NAMES),
    )
    assert all(p.stat().st_size > 0 for p in drawn)


# -- killed processes ------------------------------------------------------------------------------------


def test_killing_mpirun_fails_the_run_and_leaves_no_rank(base_config, tmp_path):
    base_config.update(
        results=str(tmp_path / "results"),
        logs=str(tmp_path / "logs"),
        iterations=LONG,
        data={"kind": "synthetic"},
        loader_workers=[0],
    )
    folder = run_dir(base_config)
    result = {}
    thread = threading.Thread(target=lambda: result.update(launch.launch(base_config, TWO_RANKS, ENV_RECORD)))
    thread.start()
    wait_for(lambda: training(folder), 120, "the run to train")
    mpirun = [
        p
        for p in processes(str(folder / "spec.json"))
        if Path(f"/proc/{p}/cmdline").read_bytes().split(b"\0")[0].endswith(b"mpirun")
    ]
    assert len(mpirun) == 1, [Path(f"/proc/{p}/cmdline").read_bytes()[:100] for p in mpirun]
    os.kill(mpirun[0], signal.SIGKILL)
    thread.join(60)
    assert result["status"] == "failed" and result["reasons"][0].startswith("mpirun exited with code")
    assert wait_for(lambda: not processes(str(folder / "spec.json")), 10, "no rank left")
    assert (folder / records_name(0)).stat().st_size > 0  # what it measured stays


def test_killed_rank_fails_its_run_the_study_completes_and_retry_redoes_it(tmp_path):
    conf, path = study(tmp_path, iterations=LONG)
    folder = run_dir(conf)
    proc = subprocess.Popen(
        SNAKEMAKE + ["--configfile", str(path)], cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True
    )
    wait_for(lambda: training(folder), 300, "the 2-rank run to train")
    os.kill(wait_for(lambda: rank_pid(folder / "spec.json", 1), 10, "rank 1"), signal.SIGKILL)
    out = proc.communicate(timeout=600)[0]
    assert proc.returncode == 0, out[-3000:]  # one failed run never stops the study

    results = Path(conf["results"])
    runs = pd.read_csv(results / "runs.csv", keep_default_na=False)
    failed = runs[runs["status"] == "failed"]
    assert failed[["ranks_per_node"]].values.tolist() == [[2]] and "mpirun exited with code" in failed["reasons"].item()
    summary = pd.read_csv(results / "summary.csv", keep_default_na=False)
    assert summary.set_index("ranks_per_node")["repeats_failed"].to_dict() == {1: 0, 2: 1}
    assert (results / "figures" / "throughput.png").stat().st_size > 0 and (results / "report.md").is_file()

    retry = subprocess.run(
        [sys.executable, "-m", "dlscale", "retry", "--configfile", str(path), "ranks_per_node=2", "--", "--nolock"],
        cwd=ROOT,
        capture_output=True,
        text=True,
    )
    assert retry.returncode == 0, retry.stdout[-3000:] + retry.stderr[-3000:]
    assert "redoing 1 failed run(s)" in retry.stdout
    assert json.loads((folder / STATUS).read_text())["status"] == "ok"
    assert (pd.read_csv(results / "runs.csv")["status"] == "ok").all()
    (kept,) = attempts(conf)  # the failed attempt, whole: its status, log and records
    assert json.loads((kept / STATUS).read_text())["status"] == "failed"
    assert "mpirun" in (kept / LOG).read_text() and (kept / records_name(0)).stat().st_size > 0

    # a record corrupted after the fact: that run becomes a failed row, the tables are still made
    _truncate_last_line(folder)
    again = snakemake(path, "--forcerun", "tidy")
    assert again.returncode == 0, again.stderr[-3000:]
    runs = pd.read_csv(results / "runs.csv", keep_default_na=False)
    assert "malformed record line" in runs.loc[runs["status"] == "failed", "reasons"].item()
    assert (results / "summary.csv").is_file()


# -- a job that cannot start --------------------------------------------------------------------------------


def test_a_host_that_does_not_resolve_is_named_in_the_reason(tmp_path):
    """The run's reason, and a sweep's, carry what ssh said before the consequences (no records)."""
    from dlscale.analysis import comm, tidy

    hostfile = tmp_path / "hostfile"
    hostfile.write_text("dlscale-nohost.invalid slots=2\n")  # .invalid never resolves (RFC 6761)
    # Open MPI drops a name's domain before it calls ssh unless told to keep it: without it, ssh
    # would look up `dlscale-nohost`, which a site's search domain could resolve
    conf = tiny_config(tmp_path, hostfile=str(hostfile), run_timeout_s=60, logs=str(tmp_path / "logs"))
    conf["launcher"]["extra_args"] = ["--mca", "orte_keep_fqdn_hostnames", "1"]
    # what ssh says here, or Open MPI where there is no ssh to call
    said = (
        "ssh: Could not resolve hostname dlscale-nohost.invalid"
        if shutil.which("ssh")
        else 'The value of the MCA parameter "plm_rsh_agent" was set to a path that could not be found'
    )

    status = launch.launch(conf, TWO_RANKS, ENV_RECORD)
    assert status["status"] == "failed" and status["reasons"][0] == "mpirun exited with code 255", status
    assert status["reasons"][1].startswith(f"first error: {said}"), status["reasons"]
    assert "rank 0 wrote no records" in status["reasons"][2:]  # the consequences come after
    _, runs, _ = tidy.build([run_dir(conf) / STATUS])
    assert runs["reasons"].item().startswith(f"mpirun exited with code 255; first error: {said}")

    out = tmp_path / "sweep.jsonl"
    launch.sweep_allreduce(
        conf, launch.Measurement(1, 2, ENV_RECORD, out, tmp_path / "sweep.log", tmp_path / "attempts")
    )
    _, fits = comm.tables([(out, 1, 2)])
    assert fits["failure"].item().startswith(f"mpirun exited with code 255; {said}"), fits["failure"].item()


def test_more_ranks_than_the_hostfiles_slots_stop_before_launch(tmp_path):
    """Too few slots never reach mpirun (whose own message is in tests/test_check_run.py): the study's
    validation, or a run launched by hand with more ranks than its config's, names the hostfile."""
    hostfile = tmp_path / "hostfile"
    hostfile.write_text("localhost slots=1\n")
    conf = tiny_config(tmp_path, hostfile=str(hostfile))
    says = (
        rf"config key 'ranks_per_node': 2 ranks per node asked for, but {re.escape(str(hostfile))} "
        r"offers fewer slots on localhost \(1 slots\)"
    )
    with pytest.raises(cfg.ConfigError, match=says):
        cfg.validate(conf)
    with pytest.raises(cfg.ConfigError, match=says):
        launch.launch({**conf, "ranks_per_node": [1]}, TWO_RANKS, ENV_RECORD)


# -- signals ---------------------------------------------------------------------------------------------


def interrupt(conf, path, target, sig, args=(), redone=False):
    """Start snakemake, wait until the 2-rank run trains, send `sig` to `target` ("pipeline": the
    snakemake process group, as Ctrl-C does; "snakemake": its process alone, as `kill` does;
    "rule": the process doing the run's rule, as a scheduler cancelling it does); `redone`: wait for
    the run's new attempt, not its finished one, to train. Returns the seconds
    until no process of the run is left, and snakemake's output."""
    folder = run_dir(conf)
    proc = subprocess.Popen(
        SNAKEMAKE + [*args, "--configfile", str(path)],
        cwd=ROOT,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        start_new_session=True,
    )
    try:
        wait_for(
            lambda: (training(folder) and (attempts(conf) or not redone)) or proc.poll() is not None,
            300,
            "the 2-rank run to train",
        )
        assert proc.poll() is None, proc.communicate()[0][-3000:]
        sent = time.time()
        if target == "pipeline":
            os.killpg(proc.pid, sig)
        elif target == "snakemake":
            os.kill(proc.pid, sig)
        else:
            (rule,) = run_rules(proc.pid)
            os.kill(rule, sig)
        wait_for(lambda: not processes(str(folder / "spec.json")), 10, "the MPI job to stop")
        stopped = time.time() - sent
        out = proc.communicate(timeout=600)[0]
    finally:  # a failed wait must not leave snakemake holding the checkout's lock for the next test
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
    assert proc.returncode != 0
    return stopped, out


@pytest.mark.parametrize("target, sig", [("snakemake", signal.SIGTERM), ("rule", signal.SIGTERM)])
def test_a_signal_stops_the_mpi_job_and_the_next_run_redoes_it(tmp_path, target, sig):
    conf, path = study(tmp_path, iterations=LONG)
    folder = run_dir(conf)
    target_file = str(folder / STATUS)
    stopped, out = interrupt(conf, path, target, sig, args=[target_file])
    assert stopped < 10, out[-3000:]
    assert not (folder / STATUS).exists()  # left incomplete
    assert json.loads((folder / ATTEMPT).read_text())["status"] == "interrupted"
    assert (folder / records_name(0)).stat().st_size > 0

    redo = snakemake(path, target_file)
    assert redo.returncode == 0, redo.stderr[-3000:]
    assert json.loads((folder / STATUS).read_text())["status"] == "ok"
    (kept,) = attempts(conf)
    assert json.loads((kept / STATUS).read_text())["status"] == "interrupted"
    assert (kept / LOG).is_file() and (kept / records_name(1)).stat().st_size > 0


def test_ctrl_c_on_a_finished_study_leaves_the_run_incomplete_and_only_it_is_redone(tmp_path):
    conf, path = study(tmp_path, iterations=LONG)
    folder = run_dir(conf)
    first = snakemake(path)
    assert first.returncode == 0, first.stderr[-3000:]

    # redo one run of a finished study, and press Ctrl-C while it trains
    stopped, out = interrupt(
        conf, path, "pipeline", signal.SIGINT, args=["--forcerun", str(folder / STATUS)], redone=True
    )
    assert stopped < 10, out[-3000:]
    assert not (folder / STATUS).exists() and (Path(conf["results"]) / "runs.csv").exists()

    # the next plain run redoes exactly that run, and the tables after it
    again = snakemake(path)
    assert again.returncode == 0, again.stderr[-3000:]
    counts = dict(re.findall(r"^(\w+)\s+(\d+)$", again.stdout + again.stderr, re.M))
    assert counts.get("run") == "1" and counts.get("allreduce") is None and counts.get("tidy") == "1", counts
    assert json.loads((folder / STATUS).read_text())["status"] == "ok"
    runs = pd.read_csv(Path(conf["results"]) / "runs.csv")
    assert (runs["status"] == "ok").all() and len(runs) == 2
    # both earlier attempts are kept whole beside the new one: the finished one and the interrupted one
    kept = attempts(conf)
    assert [json.loads((k / STATUS).read_text())["status"] for k in kept] == ["ok", "interrupted"]
    assert all((k / LOG).is_file() and (k / records_name(1)).is_file() for k in kept)
    assert snakemake(path, "--dry-run").stdout.count("Nothing to be done") == 1
