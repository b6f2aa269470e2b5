"""The Slurm path for real, on the cluster `dlscale slurm up` makes here (dlscale/runtime/slurm.py): the
shipped profile runs a study as Slurm jobs whose ranks srun starts through PMIx on emulated nodes,
and the faults a cluster has (scancel, a drained node, a time limit, Ctrl-C) lose nothing measured
and leave nothing running. Root only (daemons, namespaces); skipped elsewhere with the reason."""

import csv
import json
import signal
import subprocess
import sys
import time

import pytest
import yaml

from dlscale.runtime import emulate, slurm
from tests.conftest import ROOT, SMALL_MATMUL
from tests.test_slurm import _jobs

OK, WHY = slurm.available()
pytestmark = pytest.mark.skipif(not OK, reason=WHY)
NODES = 2
RATE_MBIT = 1000
RUN = "runs/torch/tinynet/overlap/horovod/best/native/nodes2_rpn1_bs8_lw1_t1/repeat0"
DAEMONS = ("slurmctld", "slurmd", "slurmdbd", "slurmstepd")
# The commands docs/guides/slurm.md shows, run here as they are written there.
UP = ["slurm", "up", "--nodes", str(NODES), "--rate-mbit", str(RATE_MBIT)]
STUDY = ["--profile", "profiles/slurm", "--configfile", "config/slurm.yaml", "config/slurm-emulated.yaml"]
DOWN = ["slurm", "down"]
# The plugin's first look at a submitted job comes 40 s after it by default (sized for a site's busy
# controller), then 10 s later at each look that finds nothing ended. This cluster is local and idle,
# so the tests look after 2 s (a Slurm job of a few seconds was otherwise noticed 40 s after it
# ended): this file took 416 s instead of 486 (2026-11-29). The time-limit test keeps the default:
# its job ends after a minute, which looks at 2, 14, 36, 68 and 110 s find later than at 40 and 90
# (its own time 120 s against 94).
QUICK_CHECKS = ["--slurm-init-seconds-before-status-checks", "2"]


def _cli(*args):
    return subprocess.run([sys.executable, "-m", "dlscale", *args], cwd=ROOT, capture_output=True, text=True)


@pytest.fixture(scope="module")
def cluster():
    proc = _cli(*UP)
    assert proc.returncode == 0, proc.stderr
    assert "dlslurm-n[0-1]" in proc.stdout and "idle" in proc.stdout
    yield
    _cli(*DOWN)


def _slurm(*argv):
    return subprocess.run(argv, capture_output=True, text=True, env=slurm.environ(), check=True).stdout


def _study(tmp_path, **overrides):
    """config/slurm-emulated.yaml shrunk (one framework, tinynet, one repeat) with its results under tmp_path."""
    study = {
        "framework": ["torch"],
        "model": ["tinynet"],
        "nodes": [1, NODES],
        "repeats": 1,
        "data": {"kind": "images", "images": 64, "shards": 4, "on_corrupt": "fail"},
        "allreduce_max_bytes": 65536,
        "matmul_size": SMALL_MATMUL,
        "replay": {"nodes": [NODES], "models": ["tinynet"], "iterations": 5, "warmup": 1},
        "results": str(tmp_path / "results"),
        "logs": str(tmp_path / "logs"),
        **overrides,
    }
    path = tmp_path / "study.yaml"
    path.write_text(yaml.safe_dump(study))
    return path


def _snakemake(study, *extra, profile=True, configfiles=(), quick=True):
    """The documented study command (STUDY), shrunk by `study`, then `configfiles`; `extra` (targets,
    options) goes first, where --configfile's list cannot take it; `quick`: QUICK_CHECKS."""
    args = [*QUICK_CHECKS[: 2 * quick], *STUDY] if profile else STUDY[STUDY.index("--configfile") :]
    return [sys.executable, "-m", "snakemake", *extra, *args, str(study), *map(str, configfiles)]


def _piped():
    """How the tests start snakemake: from the repository root, in the cluster's environment, its log
    (stderr) in its output."""
    return {"cwd": ROOT, "stdout": subprocess.PIPE, "stderr": subprocess.STDOUT, "text": True, "env": slurm.environ()}


def _run(argv, timeout=600):
    """snakemake's output, its log (stderr) included, in .stdout."""
    return subprocess.run(argv, timeout=timeout, **_piped())


STARTED = []


@pytest.fixture(autouse=True)
def _no_snakemake_left():
    """A test that fails while its snakemake runs does not leave it running (and polling the cluster)."""
    yield
    while STARTED:
        proc = STARTED.pop()
        if proc.poll() is None:  # as Ctrl-C: it cancels its jobs and removes its lock
            proc.send_signal(signal.SIGINT)
            try:
                proc.wait(timeout=60)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()


def _foreground_signals():
    """In the child: SIGINT as a terminal's foreground command has it. A test run started in the
    background by a shell without job control (`bash .ci/run &`, nohup) inherits SIGINT ignored, and
    snakemake kept ignoring the test's Ctrl-C (two full runs: still running 20 s and 120 s after it)."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)


def _start(argv):
    proc = subprocess.Popen(argv, preexec_fn=_foreground_signals, **_piped())
    STARTED.append(proc)
    return proc


def _wait(what, ready, timeout=180, proc=None):
    """Wait for ready() (its value), failing after `timeout` or when snakemake `proc` ends first."""
    deadline = time.monotonic() + timeout
    while not (found := ready()):
        assert time.monotonic() < deadline, f"{what}: not within {timeout} s"
        assert proc is None or proc.poll() is None, f"{what}: snakemake ended first:\n{proc.stdout.read()[-3000:]}"
        time.sleep(1)
    return found


def _running_run_job():
    """The Slurm job id of a training run whose ranks srun has started, or None."""
    jobs = [line.split() for line in _slurm("squeue", "-h", "-o", "%i %T %k").splitlines()]
    running = [job for job, state, comment in jobs if state == "RUNNING" and comment.startswith("rule_run_")]
    steps = _slurm("squeue", "-h", "-s", "-o", "%i").split()
    return next((job for job in running if f"{job}.0" in steps), None)


def _left_on_nodes():
    """Processes on the Slurm nodes other than their slurmd (a job's, a step's, a rank's)."""
    left = []
    for ns in [f"{slurm.EMULATED}-n{i}" for i in range(NODES)]:
        for pid in subprocess.run(["ip", "netns", "pids", ns], capture_output=True, text=True).stdout.split():
            try:
                comm = open(f"/proc/{pid}/comm").read().strip()
            except OSError:
                continue
            if comm != "slurmd":
                left.append(f"{ns}: {comm}")
    return left


def _nothing_left():
    _wait("every job's processes gone from the nodes", lambda: not _left_on_nodes(), timeout=60)
    _wait("no job in the queue", lambda: not _slurm("squeue", "-h").strip(), timeout=60)


def _rows(path):
    with open(path) as f:
        return list(csv.DictReader(f))


def test_ranks_started_by_srun_on_two_nodes_meet_over_the_emulated_link(cluster, tmp_path):
    script = tmp_path / "ranks.py"
    script.write_text(
        "import socket\nfrom mpi4py import MPI\nc = MPI.COMM_WORLD\n"
        "print(c.Get_rank(), socket.gethostname(), c.allreduce(1), flush=True)\n"
    )
    out = _slurm("srun", "--mpi=pmix", f"-N{NODES}", f"-n{NODES}", sys.executable, str(script))
    assert sorted(out.split("\n")[:-1]) == [f"{i} {slurm.node_name(i)} {NODES}" for i in range(NODES)]


def test_a_study_under_slurm_has_the_tables_of_the_same_study_under_mpirun(cluster, tmp_path):
    study = _study(tmp_path)
    dry = _run(_snakemake(study, "--dry-run"))
    assert dry.returncode == 0, dry.stdout[-3000:]
    proc = _run(_snakemake(study))
    assert proc.returncode == 0, proc.stdout[-5000:]
    # every MPI job ran as a Slurm job with the nodes and CPUs the dry run showed
    accounted = {}
    for line in _slurm("sacct", "-X", "-n", "-P", "-o", "Comment,NNodes,ReqCPUS,State").splitlines():
        comment, nodes, cpus, state = line.split("|")
        accounted[comment] = (int(nodes), int(cpus), state)
    asked = {
        f"rule_{rule}_wildcards_{'_'.join(w.values())}": (int(r["nodes"]), int(r["tasks"]) * int(r["cpus_per_task"]))
        for rule in ("run", "allreduce", "replay")
        for w, r in _jobs(dry.stdout)[rule]
    }
    assert len(asked) == 4 and {c: accounted[c] for c in asked} == {c: (*r, "COMPLETED") for c, r in asked.items()}
    # the same study with mpirun on an emulated cluster of the same link rate
    mpirun = tmp_path / "mpirun.yaml"
    mpirun.write_text(
        yaml.safe_dump(
            {
                "launcher": {"name": "mpirun"},
                "emulate": {"rate_mbit": RATE_MBIT},
                "results": str(tmp_path / "mpirun" / "results"),
                "logs": str(tmp_path / "mpirun" / "logs"),
            }
        )
    )
    local = _run(_snakemake(study, "--cores", "all", profile=False, configfiles=[mpirun]))
    assert local.returncode == 0, local.stdout[-5000:]
    for table in ("runs.csv", "tidy.csv", "summary.csv"):
        under_slurm = _rows(tmp_path / "results" / table)
        under_mpirun = _rows(tmp_path / "mpirun" / "results" / table)
        assert list(under_slurm[0]) == list(under_mpirun[0]), table
        key = [k for k in ("framework", "model", "nodes", "ranks_per_node", "iteration", "rank") if k in under_slurm[0]]
        assert sorted(tuple(r[k] for k in key) for r in under_slurm) == sorted(
            tuple(r[k] for k in key) for r in under_mpirun
        ), table
    assert {r["status"] for r in _rows(tmp_path / "results" / "runs.csv")} == {"ok"}
    hosts = {r["nodes"]: r["hosts"] for r in _rows(tmp_path / "results" / "runs.csv")}
    assert slurm.node_name(1) in hosts["2"], hosts
    _nothing_left()


def _has_step(records):
    """Whether a rank's records hold a step record yet."""
    try:
        return '"kind": "step"' in records.read_text() or '"kind":"step"' in records.read_text()
    except OSError:
        return False


def test_scancel_of_a_running_run_leaves_it_incomplete_and_the_next_snakemake_redoes_it(cluster, tmp_path):
    study = _study(tmp_path, iterations=300)
    target = str(tmp_path / "results" / RUN / "status.json")
    first = _start(_snakemake(study, target))
    job = _wait("a training run's ranks running under Slurm", _running_run_job, proc=first)
    run_dir = tmp_path / "results" / RUN
    # the state the test is about, not a time: rank 0 has recorded a training step (a slow machine
    # takes longer to get there, and a cancel before it leaves nothing to keep)
    _wait("rank 0's first step record", lambda: _has_step(run_dir / "rank0.jsonl"), timeout=300, proc=first)
    _slurm("scancel", job)
    out, _ = first.communicate(timeout=300)
    assert first.returncode != 0 and f"SLURM-job '{job}' failed" in out and "CANCELLED" in out, out[-3000:]
    _nothing_left()
    assert not (run_dir / "status.json").exists() and (run_dir / "rank0.jsonl").exists()
    again = _run(_snakemake(study, target))
    assert again.returncode == 0, again.stdout[-3000:]
    assert json.loads((run_dir / "status.json").read_text())["status"] == "ok"
    kept = list((tmp_path / "results" / "attempts").rglob("rank0.jsonl"))
    assert kept, "the cancelled attempt's records were not kept"
    _nothing_left()


def test_a_drained_node_holds_its_jobs_with_the_reason_while_the_other_runs_go_on(cluster, tmp_path):
    study = _study(tmp_path)
    drained = slurm.node_name(NODES - 1)
    _slurm("scontrol", "update", f"nodename={drained}", "state=drain", "reason=dlscale test drain")
    try:
        proc = _start(_snakemake(study))
        one_node = tmp_path / "results" / RUN.replace("nodes2", "nodes1") / "status.json"
        _wait("the 1-node run done on the node left", one_node.exists, timeout=300, proc=proc)
        queue = [line.split(" ", 2) for line in _slurm("squeue", "-h", "-o", "%k %T %r").splitlines()]
        two_node = {comment: (state, reason) for comment, state, reason in queue if "_2_1" in comment}
        assert two_node and all(state == "PENDING" for state, _ in two_node.values()), queue
        # the first in line says why (those behind it: "Priority")
        assert any("DRAINED" in reason or "ReqNodeNotAvail" in reason for _, reason in two_node.values()), queue
        assert json.loads(one_node.read_text())["status"] == "ok"
    finally:
        _slurm("scontrol", "update", f"nodename={drained}", "state=resume")
    out, _ = proc.communicate(timeout=400)
    assert proc.returncode == 0, out[-3000:]
    assert {r["status"] for r in _rows(tmp_path / "results" / "runs.csv")} == {"ok"}
    _nothing_left()


def test_a_run_past_its_time_limit_fails_with_that_reason(cluster, tmp_path):
    study = _study(tmp_path, iterations=100000)
    target = str(tmp_path / "results" / RUN / "status.json")
    proc = _run(_snakemake(study, target, "--default-resources", "runtime=1", quick=False), timeout=400)
    assert proc.returncode != 0 and "TIMEOUT" in proc.stdout, proc.stdout[-3000:]
    assert not (tmp_path / "results" / RUN / "status.json").exists()
    assert (tmp_path / "results" / RUN / "rank0.jsonl").exists()
    _nothing_left()


def test_ctrl_c_to_snakemake_cancels_its_jobs(cluster, tmp_path):
    study = _study(tmp_path, iterations=100000)
    proc = _start(_snakemake(study, str(tmp_path / "results" / RUN / "status.json")))
    _wait("a training run's ranks running under Slurm", _running_run_job, proc=proc)
    proc.send_signal(signal.SIGINT)
    # It exits within about a second (0.7-1.1 s measured). Before dlscale/runtime/shutdown.py ended the Slurm plugin's
    # status-check sleep at shutdown, it exited only when that sleep ran out: 31 s here (68 s when Ctrl-C
    # came 154 s into the run; the sleep grows to 180 s). A miss shows what snakemake last said.
    try:
        out, _ = proc.communicate(timeout=20)
    except subprocess.TimeoutExpired:
        proc.kill()
        out, _ = proc.communicate()
        pytest.fail(f"snakemake still running 20 s after Ctrl-C; it last said:\n{out[-3000:]}")
    assert proc.returncode != 0, out[-3000:]
    _nothing_left()
    assert not (tmp_path / "results" / RUN / "status.json").exists()


def test_down_removes_the_cluster_and_everything_running_on_it(cluster):
    proc = _cli(*DOWN)
    assert proc.returncode == 0, proc.stderr
    assert not slurm.STATE.exists() and not slurm.is_up()
    assert not [ns for ns in emulate.namespaces() if ns.startswith(slurm.EMULATED)]
    ps = subprocess.run(["ps", "-eo", "stat,comm"], capture_output=True, text=True).stdout.split("\n")[1:]
    assert not [line for line in ps if line.split()[-1:] and line.split()[-1] in DAEMONS and "Z" not in line]
    assert slurm.HOSTS_MARK not in slurm.ETC_HOSTS.read_text()
    assert not (slurm.SITE_CONF.is_symlink() and slurm.SITE_CONF.readlink() == slurm.CONF)
