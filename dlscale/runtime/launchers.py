"""The launchers a study can name (`launcher.name`), registered by name (the config schema's list
is made from the registry): each one a class with its argv, a pure function from a job to an argv
list, one signature, tested by exact argv,

  argv(hosts, ranks_per_node, launcher, command, env, cpus_per_task=1, as_root=False)

hosts: the job's nodes (for srun only their number counts: Slurm places the ranks); launcher: the
config's `launcher` section; command: what every rank runs; env: the rank environment; and what the
job layer (dlscale/runtime/execution.py) asks of it: whether a scheduler places the ranks (then the
hostfile is not read) and the program it needs on PATH. Adding a launcher is one class here.
"""

import shutil


def mpirun_argv(hosts, ranks_per_node, launcher, command, env, cpus_per_task=1, as_root=False):
    """argv for Open MPI's mpirun: `ranks_per_node` ranks on each of `hosts`, each running `command`.

    `env` is exported to every rank with -x NAME=VALUE (sorted, so the argv is deterministic).
    """
    argv = ["mpirun"]
    if as_root:
        argv.append("--allow-run-as-root")
    argv += [
        "-np",
        str(len(hosts) * ranks_per_node),
        "--host",
        ",".join(f"{h}:{ranks_per_node}" for h in hosts),
        "--map-by",
        f"ppr:{ranks_per_node}:node",
        "--bind-to",
        launcher.get("bind_to", "none"),
    ]
    if launcher.get("oversubscribe"):
        argv.append("--oversubscribe")
    for name, value in sorted(env.items()):
        argv += ["-x", f"{name}={value}"]
    argv += list(launcher.get("extra_args", []))
    return argv + list(command)


def _env_prefix(env):
    """`env NAME=VALUE ...` before a command: how srun and horovodrun runs get the rank environment
    (values may hold commas, which srun's --export cannot carry)."""
    return ["env", *(f"{name}={value}" for name, value in sorted(env.items()))] if env else []


def horovodrun_argv(hosts, ranks_per_node, launcher, command, env, cpus_per_task=1, as_root=False):
    """argv for `horovodrun --mpi` (Horovod's launcher over mpirun; it adds --allow-run-as-root and
    exports the launching environment itself). Binding and extra mpirun arguments pass through."""
    binding = f"--bind-to {launcher.get('bind_to', 'none')} --map-by ppr:{ranks_per_node}:node"
    if launcher.get("oversubscribe"):
        binding += " --oversubscribe"
    argv = [
        "horovodrun",
        "-np",
        str(len(hosts) * ranks_per_node),
        "-H",
        ",".join(f"{h}:{ranks_per_node}" for h in hosts),
        "--mpi",
        f"--binding-args={binding}",
    ]
    if launcher.get("network_interfaces"):
        argv.append(f"--network-interfaces={','.join(launcher['network_interfaces'])}")
    if launcher.get("extra_args"):
        argv.append(f"--mpi-args={' '.join(launcher['extra_args'])}")
    return argv + _env_prefix(env) + list(command)


SRUN_BIND = {"none": "none", "core": "cores", "socket": "sockets", "numa": "ldoms", "hwthread": "threads"}


def srun_argv(hosts, ranks_per_node, launcher, command, env, cpus_per_task=1, as_root=False):
    """argv for Slurm's srun inside an allocation: len(`hosts`) nodes (Slurm picks which), `ranks_per_node` tasks
    each with
    `cpus_per_task` CPUs, MPI wired up by the `launcher.mpi` plugin (pmix by default), the job
    killed if one rank dies. Every count is explicit: Snakemake's Slurm job step removes the
    allocation's SLURM_* counts from the environment."""
    nodes = len(hosts)
    argv = [
        "srun",
        f"--nodes={nodes}",
        f"--ntasks={nodes * ranks_per_node}",
        f"--ntasks-per-node={ranks_per_node}",
        f"--cpus-per-task={cpus_per_task}",
        f"--cpu-bind={SRUN_BIND[launcher.get('bind_to', 'none')]}",
        f"--mpi={launcher.get('mpi', 'pmix')}",
        "--kill-on-bad-exit=1",
    ]
    return argv + list(launcher.get("extra_args", [])) + _env_prefix(env) + list(command)


class Launcher:
    """A way to start a job's ranks."""

    name = ""
    scheduler_places_ranks = False  # Slurm's srun: the job's hosts are asked of the scheduler
    program = ""  # what must be on PATH
    without = ""  # what to do where it is not

    def argv(self, hosts, ranks_per_node, launcher, command, env, cpus_per_task=1, as_root=False):
        raise NotImplementedError

    def check(self):
        """Raise LauncherError where the launcher's program is not on PATH."""
        if self.program and not shutil.which(self.program):
            raise LauncherError(f"launcher {self.name}: no {self.program} on PATH ({self.without})")


class LauncherError(RuntimeError):
    pass


LAUNCHERS = {}


def register(cls):
    """Add a Launcher class to the registry under its name (one instance: launchers hold no state)."""
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
    name, program = "srun", "srun"
    without = "run the study inside a Slurm allocation, or use the Slurm profile"
    scheduler_places_ranks = True
    argv = staticmethod(srun_argv)


NAMES = tuple(LAUNCHERS)
# An emulated cluster (dlscale/runtime/emulate.py) runs its jobs with mpirun in its node 0: the one
# launcher its network namespaces have been tested with.
EMULATED = LAUNCHERS["mpirun"]
