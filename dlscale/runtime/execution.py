"""Running one MPI job of the study: its hosts (the hostfile's, Slurm's, or an emulated cluster's),
its launcher's argv, and the process itself, in a group of its own that is killed whole on timeout."""

import contextlib
import os
import signal
import subprocess
import time
from pathlib import Path

from dlscale.core.vocabulary import HOSTS_ENV
from dlscale.runtime import config as cfg
from dlscale.runtime import emulate
from dlscale.runtime.hosts import parse_hostfile, select_hosts
from dlscale.runtime.launchers import EMULATED, LAUNCHERS, Job, LauncherError


class LaunchError(RuntimeError):
    pass


@contextlib.contextmanager
def job(job_plan, nodes, ranks_per_node, command, env):
    """One MPI job of `command` in `env`: yields (hosts, launcher argv, process env or None, cluster or None)."""
    launcher, emulated = job_plan.launcher, job_plan.emulate
    chosen = LAUNCHERS[launcher["name"]]
    options = {"cpus_per_task": job_plan.threads_per_rank, "as_root": os.geteuid() == 0}

    def argv(hosts, env, using=chosen):
        return using.argv(Job(hosts, ranks_per_node, command, env, **options), launcher)

    if chosen.scheduler_places_ranks:
        try:
            chosen.check()
        except LauncherError as exc:
            raise LaunchError(str(exc)) from None
        yield slurm_hosts(), argv([None] * nodes, env), None, None
        return
    if not emulated:
        hostfile = job_plan.hostfile
        hosts = select_hosts(parse_hostfile(cfg.resolve(hostfile)), nodes, ranks_per_node, hostfile=hostfile)
        env = {**env, HOSTS_ENV: ",".join(hosts)}
        yield hosts, argv(hosts, env), None, None
        return
    # Node i gets the same CPUs in every job of the study, so 1-node baselines compute like node 0.
    cpus = emulate.node_cpus(max((*job_plan.study_nodes, nodes)))[:nodes]
    control = emulated.get("congestion_control", emulate.CONGESTION_CONTROL)
    with emulate.cluster(nodes, emulated["rate_mbit"], emulated.get("delay_ms", 0), cpus, control) as cluster:
        env = {**env, HOSTS_ENV: ",".join(cluster.hosts)}
        wrapped = cluster.wrap(argv(cluster.hosts, env, using=EMULATED))
        yield cluster.hosts, wrapped, {**os.environ, **cluster.launch_env()}, cluster


def slurm_hosts():
    """["slurm job ID", its nodes...]: Snakemake's job step keeps SLURM_JOB_ID, not the node list (asked of Slurm)."""
    job = os.environ.get("SLURM_JOB_ID", "?")
    names = os.environ.get("SLURM_JOB_NODELIST") or _slurm_out("squeue", "-h", "-j", job, "-o", "%N")
    return [f"slurm job {job}", *(_slurm_out("scontrol", "show", "hostnames", names).split() if names else [])]


def _slurm_out(*argv):
    proc = subprocess.run(argv, capture_output=True, text=True)
    return proc.stdout.strip() if proc.returncode == 0 else ""


def job_failure(rc, timed_out, timeout_s, launcher="mpirun"):
    """Why a finished MPI job failed, or None."""
    if timed_out:
        return f"timed out after {timeout_s} s; job killed"
    return f"{launcher} exited with code {rc}" if rc != 0 else None


class Interrupted(BaseException):
    """A signal asked this process to stop; a BaseException, so that no `except Exception` swallows it."""

    def __init__(self, signum):
        super().__init__(f"interrupted by {signal.Signals(signum).name}")
        self.signum = signum


STOP_SIGNALS = (signal.SIGTERM, signal.SIGINT, signal.SIGHUP)
GRACE_S = 3  # after SIGTERM, this long before SIGKILL: a stopped job is gone within 10 s


@contextlib.contextmanager
def interruptible():
    """In the main thread: STOP_SIGNALS raise `Interrupted`, so the MPI job and emulated cluster are stopped whole."""

    def raise_interrupted(signum, _frame):
        for sig in STOP_SIGNALS:  # a second signal (Ctrl-C and the pipeline's own) must not cut the cleanup short
            signal.signal(sig, signal.SIG_IGN)
        raise Interrupted(signum)

    previous = {sig: signal.signal(sig, raise_interrupted) for sig in STOP_SIGNALS}
    try:
        yield
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)


def die_with_parent(parent_pid):
    """SIGTERM when the thread that started this process dies (Linux), so no MPI job outlives a killed pipeline."""
    import ctypes

    with contextlib.suppress(OSError, AttributeError):
        ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGTERM)  # 1: PR_SET_PDEATHSIG
    if os.getppid() != parent_pid:
        raise Interrupted(signal.SIGTERM)


def session_members(sid):
    """Pids in session `sid` (from /proc): mpirun gives each local rank a process group, not a session, of its own."""
    members = []
    for stat in Path("/proc").glob("[0-9]*/stat"):
        with contextlib.suppress(OSError, IndexError, ValueError):
            if int(stat.read_text().rsplit(")", 1)[1].split()[3]) == sid:
                members.append(int(stat.parent.name))
    return members


def _kill_session(sid, sig):
    for pid in session_members(sid):
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, sig)


def _stop(proc):
    """SIGTERM to every process of the job's session (mpirun passes it on), after GRACE_S SIGKILL."""
    _kill_session(proc.pid, signal.SIGTERM)
    deadline = time.time() + GRACE_S
    while (proc.poll() is None or session_members(proc.pid)) and time.time() < deadline:
        time.sleep(0.1)
    _kill_session(proc.pid, signal.SIGKILL)
    proc.wait()


def execute(argv, log_path, timeout_s, env=None):
    """Run argv in a new session, stopped whole on timeout or interruption. Returns (rc, timed_out)."""
    with open(log_path, "ab") as log:
        proc = subprocess.Popen(argv, stdout=log, stderr=subprocess.STDOUT, env=env, start_new_session=True)
        try:
            rc = proc.wait(timeout=timeout_s)
        except subprocess.TimeoutExpired:
            _stop(proc)
            return proc.returncode, True
        except BaseException:
            _stop(proc)
            raise
        _kill_session(proc.pid, signal.SIGKILL)  # ranks left behind by an mpirun that was killed
        return rc, False
