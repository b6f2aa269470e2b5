"""The launchers a study can name (`launcher.name`): each with `argv(job, launcher)`, a pure function of a `Job`
and the config's `launcher` section (tested by exact argv), and the program it needs on PATH."""

import os
import shutil
from dataclasses import dataclass, field


@dataclass(frozen=True)
class Job:
    """`ranks_per_node` ranks on each of `hosts` (srun: their number), each running `command` in `env`."""

    hosts: list
    ranks_per_node: int
    command: list
    env: dict = field(default_factory=dict)
    cpus_per_task: int = 1
    as_root: bool = False  # mpirun refuses root unless told

    @property
    def ranks(self):
        return len(self.hosts) * self.ranks_per_node


# How the benchmarks and tests start ranks on this machine: mpirun, unbound.
LOCAL = {"name": "mpirun", "bind_to": "none"}


def local_argv(ranks, command, env):
    """mpirun's argv for `ranks` ranks on this machine running `command` with `env` (LOCAL)."""
    return mpirun_argv(Job(["localhost"], ranks, command, env, as_root=os.geteuid() == 0), LOCAL)


def _hosts(job):
    """`host:slots,...`: every host of the job with its ranks."""
    return ",".join(f"{h}:{job.ranks_per_node}" for h in job.hosts)


def mpirun_argv(job, launcher):
    """argv for Open MPI's mpirun; the env is exported with -x NAME=VALUE, sorted (deterministic argv)."""
    argv = ["mpirun"]
    if job.as_root:
        argv.append("--allow-run-as-root")
    argv += ["-np", str(job.ranks), "--host", _hosts(job), "--map-by", f"ppr:{job.ranks_per_node}:node"]
    argv += ["--bind-to", launcher.get("bind_to", "none")]
    if launcher.get("oversubscribe"):
        argv.append("--oversubscribe")
    for name, value in sorted(job.env.items()):
        argv += ["-x", f"{name}={value}"]
    argv += list(launcher.get("extra_args", []))
    return argv + list(job.command)


def _env_prefix(env):
    """`env NAME=VALUE ...` before a command, for srun and horovodrun (srun's --export cannot carry commas)."""
    return ["env", *(f"{name}={value}" for name, value in sorted(env.items()))] if env else []


def horovodrun_argv(job, launcher):
    """argv for `horovodrun --mpi` (it adds --allow-run-as-root and exports the environment itself)."""
    binding = f"--bind-to {launcher.get('bind_to', 'none')} --map-by ppr:{job.ranks_per_node}:node"
    if launcher.get("oversubscribe"):
        binding += " --oversubscribe"
    argv = ["horovodrun", "-np", str(job.ranks), "-H", _hosts(job), "--mpi", f"--binding-args={binding}"]
    if launcher.get("network_interfaces"):
        argv.append(f"--network-interfaces={','.join(launcher['network_interfaces'])}")
    if launcher.get("extra_args"):
        argv.append(f"--mpi-args={' '.join(launcher['extra_args'])}")
    return argv + _env_prefix(job.env) + list(job.command)


SRUN_BIND = {"none": "none", "core": "cores", "socket": "sockets", "numa": "ldoms", "hwthread": "threads"}


def srun_argv(job, launcher):
    """argv for Slurm's srun in an allocation, every count explicit (Snakemake's job step removes SLURM_* ones)."""
    argv = ["srun", f"--nodes={len(job.hosts)}", f"--ntasks={job.ranks}", f"--ntasks-per-node={job.ranks_per_node}"]
    argv += [f"--cpus-per-task={job.cpus_per_task}", f"--cpu-bind={SRUN_BIND[launcher.get('bind_to', 'none')]}"]
    argv += [f"--mpi={launcher.get('mpi', 'pmix')}", "--kill-on-bad-exit=1"]
    return argv + list(launcher.get("extra_args", [])) + _env_prefix(job.env) + list(job.command)


class Launcher:
    """A way to start a job's ranks."""

    name = ""
    scheduler_places_ranks = False  # Slurm's srun: the job's hosts are asked of the scheduler
    program = ""  # what must be on PATH
    without = ""  # what to do where it is not

    def argv(self, job, launcher):
        raise NotImplementedError

    def check(self):
        """Raise LauncherError where the launcher's program is not on PATH."""
        if self.program and not shutil.which(self.program):
            raise LauncherError(f"launcher {self.name}: no {self.program} on PATH ({self.without})")


class LauncherError(RuntimeError):
    pass


LAUNCHERS = {}


def register(cls):
    """Register a Launcher class under its name (one instance: launchers hold no state)."""
    LAUNCHERS[cls.name] = cls()
    return cls


@register
class Mpirun(Launcher):
    name, program, without = "mpirun", "mpirun", "install Open MPI, or load the site's MPI module"
    argv = staticmethod(mpirun_argv)


@register
class Horovodrun(Launcher):
    name, program, without = "horovodrun", "horovodrun", "it comes with Horovod, in each framework's environment"
    argv = staticmethod(horovodrun_argv)


@register
class Srun(Launcher):
    name, program, without = "srun", "srun", "run the study inside a Slurm allocation, or use the Slurm profile"
    scheduler_places_ranks = True
    argv = staticmethod(srun_argv)


def apart(launcher, session_dir):
    """mpirun for one of several jobs started at once on a node, its session directory under `session_dir`: two
    creating /tmp/ompi.<host>.<uid> at once fail one ("mkdir was unable to create ... File exists", 2026-11-29)."""
    if launcher.get("name", "mpirun") != Mpirun.name:
        return launcher
    return {**launcher, "extra_args": ["--mca", "orte_tmpdir_base", str(session_dir), *launcher.get("extra_args", [])]}


NAMES = tuple(LAUNCHERS)
# An emulated cluster runs its jobs with mpirun in its node 0: the one launcher tested in its namespaces.
EMULATED = LAUNCHERS["mpirun"]
