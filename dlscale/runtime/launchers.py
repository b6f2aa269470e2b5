"""The launchers a study can name (`launcher.name`): pure functions from a job to an argv list,
one signature, tested by exact argv.

  argv(hosts, ranks_per_node, launcher, command, env, cpus_per_task=1, as_root=False)

hosts: the job's nodes (for srun only their number counts: Slurm places the ranks); launcher: the
config's `launcher` section; command: what every rank runs; env: the rank environment.
"""


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


LAUNCHERS = {"mpirun": mpirun_argv, "horovodrun": horovodrun_argv, "srun": srun_argv}
