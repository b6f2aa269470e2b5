"""Running one MPI job of the study: its hosts (the hostfile's, Slurm's, or an emulated cluster's),
its launcher's argv, and the process itself, in a group of its own that is killed whole on timeout."""

import contextlib
import os
import shutil
import signal
import subprocess

from harness import config as cfg
from harness import emulate
from harness.launchers import LAUNCHERS, mpirun_argv


class LaunchError(RuntimeError):
    pass


@contextlib.contextmanager
def job(config, nodes, ranks_per_node, command, env):
    """One MPI job of the study, every rank running `command` in the rank environment `env`: yields
    (hosts, launcher argv, process environment or None, emulated cluster or None). The launcher is `launcher.name`: mpirun, horovodrun or srun (Slurm places
    the ranks; the hostfile is not read).

    Hosts are the hostfile's first `nodes` hosts or, with `emulate` in the config, the nodes of an
    emulated cluster made for this job (mpirun then runs in its node 0) and removed afterwards;
    emulated node i runs on CPUs of its own (emulate.node_cpus over the study's largest node count).
    """
    launcher = config["launcher"]
    emulated = config.get("emulate")
    argv_of = LAUNCHERS[launcher["name"]]
    options = {"cpus_per_task": config["threads_per_rank"], "as_root": os.geteuid() == 0}
    if launcher["name"] == "srun":
        if not shutil.which("srun"):
            raise LaunchError("launcher srun: no srun on PATH (run the study inside a Slurm allocation, "
                              "or use the Slurm profile)")
        yield ([f"slurm job {os.environ.get('SLURM_JOB_ID', '?')}"],
               argv_of([None] * nodes, ranks_per_node, launcher, command, env, **options), None, None)
        return
    if not emulated:
        hosts = cfg.select_hosts(cfg.parse_hostfile(cfg.resolve(config["hostfile"])), nodes, ranks_per_node,
                                 hostfile=config["hostfile"])
        yield hosts, argv_of(hosts, ranks_per_node, launcher, command, env, **options), None, None
        return
    # Node i gets the same CPUs in every job of the study, so 1-node baselines compute like node 0.
    cpus = emulate.node_cpus(max(*config["nodes"], nodes))[:nodes]
    with emulate.cluster(nodes, emulated["rate_mbit"], emulated.get("delay_ms", 0), cpus) as cluster:
        argv = mpirun_argv(cluster.hosts, ranks_per_node, config["launcher"], command, env, **options)
        yield cluster.hosts, cluster.wrap(argv), {**os.environ, **cluster.launch_env()}, cluster


def job_failure(rc, timed_out, timeout_s, launcher="mpirun"):
    """Why a finished MPI job failed, or None."""
    if timed_out:
        return f"timed out after {timeout_s} s; job killed"
    if rc != 0:
        return f"{launcher} exited with code {rc}"
    return None


def execute(argv, log_path, timeout_s, env=None):
    """Run argv in a new process group; kill the whole group on timeout. Returns (rc, timed_out)."""
    with open(log_path, "ab") as log:
        proc = subprocess.Popen(argv, stdout=log, stderr=subprocess.STDOUT, env=env,
                                start_new_session=True)
        try:
            return proc.wait(timeout=timeout_s), False
        except subprocess.TimeoutExpired:
            for sig, grace in ((signal.SIGTERM, 10), (signal.SIGKILL, 10)):
                try:
                    os.killpg(proc.pid, sig)
                except ProcessLookupError:
                    break
                try:
                    proc.wait(timeout=grace)
                    break
                except subprocess.TimeoutExpired:
                    continue
            return proc.returncode, True
