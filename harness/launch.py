"""Launch one run as one MPI job, keep its logs, and decide whether it ran right.

`mpirun_argv`, `horovodrun_argv` and `srun_argv` are pure functions from a run to an argv list
(tested by exact argv); `launcher.name` in the config picks one. `execute`
starts the job in its own process group with a time limit; a job that times out is killed whole.
`check_run` reads every rank's records and returns the reasons the run is not correct (missing
ranks, missing phases, non-finite loss, ranks whose weights disagree after training). The
outcome, good or bad, is written to ``status.json``; a failed run never stops the study.
"""

import contextlib
import json
import math
import os
import re
import shutil
import signal
import subprocess
import time
from pathlib import Path

from harness import config as cfg
from harness import emulate
from harness.records import IDENTITY, parse_file
from harness.vocabulary import SPEC, STATUS, records_name, trace_name

WORKLOAD = ["-m", "workloads.train"]
CHECKSUM_RTOL = 1e-6


def thread_env(threads):
    """Compute threads of one rank, for every framework: OpenMP/MKL pools (PyTorch, MXNet, oneDNN)
    and MXNet's engine workers; PyTorch and TensorFlow also set their pools in the workload."""
    return {"OMP_NUM_THREADS": str(threads), "MKL_NUM_THREADS": str(threads),
            "MXNET_CPU_WORKER_NTHREADS": str(threads)}


def workload_command(python, spec_path):
    """The program every rank of a training run executes."""
    return [str(python), *WORKLOAD, str(spec_path)]


def mpirun_argv(hosts, ranks_per_node, launcher, command, env, as_root=False):
    """argv for Open MPI's mpirun: `ranks_per_node` ranks on each of `hosts`, each running `command`.

    `env` is exported to every rank with -x NAME=VALUE (sorted, so the argv is deterministic).
    """
    argv = ["mpirun"]
    if as_root:
        argv.append("--allow-run-as-root")
    argv += ["-np", str(len(hosts) * ranks_per_node),
             "--host", ",".join(f"{h}:{ranks_per_node}" for h in hosts),
             "--map-by", f"ppr:{ranks_per_node}:node",
             "--bind-to", launcher.get("bind_to", "none")]
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


def horovodrun_argv(hosts, ranks_per_node, launcher, command, env):
    """argv for `horovodrun --mpi` (Horovod's launcher over mpirun; it adds --allow-run-as-root and
    exports the launching environment itself). Binding and extra mpirun arguments pass through."""
    binding = f"--bind-to {launcher.get('bind_to', 'none')} --map-by ppr:{ranks_per_node}:node"
    if launcher.get("oversubscribe"):
        binding += " --oversubscribe"
    argv = ["horovodrun", "-np", str(len(hosts) * ranks_per_node),
            "-H", ",".join(f"{h}:{ranks_per_node}" for h in hosts), "--mpi", f"--binding-args={binding}"]
    if launcher.get("network_interfaces"):
        argv.append(f"--network-interfaces={','.join(launcher['network_interfaces'])}")
    if launcher.get("extra_args"):
        argv.append(f"--mpi-args={' '.join(launcher['extra_args'])}")
    return argv + _env_prefix(env) + list(command)


SRUN_BIND = {"none": "none", "core": "cores", "socket": "sockets", "numa": "ldoms", "hwthread": "threads"}


def srun_argv(nodes, ranks_per_node, launcher, command, env, cpus_per_task=1):
    """argv for Slurm's srun inside an allocation: `nodes` nodes, `ranks_per_node` tasks each with
    `cpus_per_task` CPUs, MPI wired up by the `launcher.mpi` plugin (pmix by default), the job
    killed if one rank dies. Every count is explicit: Snakemake's Slurm job step removes the
    allocation's SLURM_* counts from the environment."""
    argv = ["srun", f"--nodes={nodes}", f"--ntasks={nodes * ranks_per_node}",
            f"--ntasks-per-node={ranks_per_node}", f"--cpus-per-task={cpus_per_task}",
            f"--cpu-bind={SRUN_BIND[launcher.get('bind_to', 'none')]}",
            f"--mpi={launcher.get('mpi', 'pmix')}", "--kill-on-bad-exit=1"]
    return argv + list(launcher.get("extra_args", [])) + _env_prefix(env) + list(command)


def run_spec(config, run, out_dir):
    """The complete description of one run handed to every rank (spec.json)."""
    spec = {k: config[k] for k in IDENTITY if k in config}
    spec.update(run)
    spec.update({k: config[k] for k in ("warmup", "iterations", "profile_iterations", "autotune", "tf32", "lr",
                                        "momentum", "seed", "device")})
    spec["out_dir"] = str(out_dir)
    return spec


def math_env(autotune, tf32):
    """The same cuDNN autotuning and TF32 setting for every framework, where it is an environment
    variable (TensorFlow's and MXNet's autotuning; NVIDIA's TF32 override reaches MXNet's cuBLAS and
    cuDNN calls); PyTorch and TensorFlow also set their own switches from the spec."""
    env = {"TF_CUDNN_USE_AUTOTUNE": str(int(autotune)), "MXNET_CUDNN_AUTOTUNE_DEFAULT": str(int(autotune))}
    if not tf32:
        env["NVIDIA_TF32_OVERRIDE"] = "0"
    return env


def rank_env(config):
    # HOROVOD_TIMELINE=DYNAMIC lets ranks record Horovod's timeline over chosen iterations only.
    env = {**thread_env(config["threads_per_rank"]), **math_env(config.get("autotune", True), config.get("tf32", False)),
           "PYTHONPATH": str(cfg.ROOT), "HOROVOD_TIMELINE": "DYNAMIC"}
    env.update({k: str(v) for k, v in config["launcher"].get("env", {}).items()})
    return env


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


def check_run(run_dir, size, traced=False):
    """Correctness of a finished run from its records (and, when `traced`, every rank's trace file).
    Returns (problems, parse errors)."""
    problems, errors, checksums = [], [], {}
    if traced:
        missing = [r for r in range(size) if not (Path(run_dir) / trace_name(r)).is_file()]
        if missing:
            problems.append(f"rank(s) {missing} wrote no trace of the profiled iterations")
    for rank in range(size):
        path = Path(run_dir) / records_name(rank)
        if not path.is_file():
            problems.append(f"rank {rank} wrote no records")
            continue
        records, errs = parse_file(path)
        errors += errs
        steps = [r for r in records if r["kind"] == "step"]
        ends = [r for r in records if r["kind"] == "end"]
        if not any(r["kind"] == "run" for r in records):
            problems.append(f"rank {rank} has no run record")
        if not ends:
            problems.append(f"rank {rank} did not finish (no end record after {len(steps)} steps)")
            continue
        if len(steps) != ends[0]["iterations"]:
            problems.append(f"rank {rank} recorded {len(steps)} steps of {ends[0]['iterations']}")
        bad = [s["iteration"] for s in steps if not isinstance(s["loss"], (int, float))
               or not math.isfinite(s["loss"])]
        if bad:
            problems.append(f"rank {rank}: loss not finite at iterations {bad[:5]}")
        checksums[rank] = ends[0]["checksum"]
    if checksums:
        ref = checksums[min(checksums)]
        off = [r for r, c in checksums.items() if not math.isclose(c, ref, rel_tol=CHECKSUM_RTOL, abs_tol=1e-9)]
        if off:
            problems.append(f"weights differ across ranks after training (ranks {off} vs rank "
                            f"{min(checksums)}): gradients were not averaged")
    if errors:
        problems.append(f"{len(errors)} malformed record line(s), first: {errors[0]}")
    return problems, errors


ERROR_LINE = re.compile(r"^(?:[\w.]+\.)?\w*(?:Error|Exception|Exit)\b(?::.*)?$")


def first_error(log_text):
    """The first Python exception line a rank printed (the root cause, not the echoes), or None."""
    for line in log_text.splitlines():
        line = line.strip()
        if ERROR_LINE.match(line):
            return line
    return None


def _keep_previous(run_dir, attempts_root):
    """Move an earlier attempt's files out of the way (never delete measured data)."""
    if run_dir.exists() and any(run_dir.iterdir()):
        dest = attempts_root / time.strftime("%Y%m%dT%H%M%S")
        dest.parent.mkdir(parents=True, exist_ok=True)
        shutil.move(str(run_dir), str(dest))
    run_dir.mkdir(parents=True, exist_ok=True)


def _fresh_log(path):
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("")


class LaunchError(RuntimeError):
    pass


@contextlib.contextmanager
def job(config, nodes, ranks_per_node, command):
    """One MPI job of the study: yields (hosts, launcher argv, process environment or None, emulated
    cluster or None). The launcher is `launcher.name`: mpirun, horovodrun or srun (Slurm places
    the ranks; the hostfile is not read).

    Hosts are the hostfile's first `nodes` hosts or, with `emulate` in the config, the nodes of an
    emulated cluster made for this job (mpirun then runs in its node 0) and removed afterwards;
    emulated node i runs on CPUs of its own (emulate.node_cpus over the study's largest node count).
    """
    env, launcher = rank_env(config), config["launcher"]
    emulated = config.get("emulate")
    if launcher["name"] == "srun":
        if not shutil.which("srun"):
            raise LaunchError("launcher srun: no srun on PATH (run the study inside a Slurm allocation, "
                              "or use the Slurm profile)")
        yield ([f"slurm job {os.environ.get('SLURM_JOB_ID', '?')}"],
               srun_argv(nodes, ranks_per_node, launcher, command, env, config["threads_per_rank"]), None, None)
        return
    if not emulated:
        hosts = cfg.select_hosts(cfg.parse_hostfile(cfg.resolve(config["hostfile"])), nodes, ranks_per_node,
                                 hostfile=config["hostfile"])
        if launcher["name"] == "horovodrun":
            yield hosts, horovodrun_argv(hosts, ranks_per_node, launcher, command, env), None, None
        else:
            yield hosts, mpirun_argv(hosts, ranks_per_node, launcher, command, env,
                                     as_root=os.geteuid() == 0), None, None
        return
    # Node i gets the same CPUs in every job of the study, so 1-node baselines compute like node 0.
    cpus = emulate.node_cpus(max(*config["nodes"], nodes))[:nodes]
    with emulate.cluster(nodes, emulated["rate_mbit"], emulated.get("delay_ms", 0), cpus) as cluster:
        argv = mpirun_argv(cluster.hosts, ranks_per_node, config["launcher"], command, env,
                           as_root=os.geteuid() == 0)
        yield cluster.hosts, cluster.wrap(argv), {**os.environ, **cluster.launch_env()}, cluster


def job_failure(rc, timed_out, timeout_s, launcher="mpirun"):
    """Why a finished MPI job failed, or None."""
    if timed_out:
        return f"timed out after {timeout_s} s; job killed"
    if rc != 0:
        return f"{launcher} exited with code {rc}"
    return None


def launch(config, run, env_record, status_path=None, log_path=None, attempts_root=None):
    """Run one study run end to end and write its status.json. Returns the status dict.

    The pipeline's rule passes its declared status file and log, and where an earlier attempt's files
    go; by hand (`python -m harness launch`) they are the config's (`config.run_files`)."""
    if status_path is None:
        run_dir, log_path, attempts_root = cfg.run_files(config, run)
    else:
        run_dir, log_path, attempts_root = Path(status_path).parent, Path(log_path), Path(attempts_root)
    _keep_previous(run_dir, attempts_root)
    _fresh_log(log_path)
    spec = run_spec(config, run, run_dir.resolve())
    spec_path = run_dir / SPEC
    started = time.time()
    command = workload_command(env_record["python"], spec_path.resolve())
    try:
        with job(config, run["nodes"], run["ranks_per_node"], command) as (hosts, argv, proc_env, cluster):
            spec["launch"] = {"argv": argv, "hosts": hosts, "mpi": env_record.get("mpi", {}),
                              "pins": env_record.get("pins", {}), "environment": env_record.get("key"),
                              "emulated": cluster.describe() if cluster else None}
            spec_path.write_text(json.dumps(spec, indent=2) + "\n")
            rc, timed_out = execute(argv, log_path, config["run_timeout_s"], proc_env)
        failure = job_failure(rc, timed_out, config["run_timeout_s"], config["launcher"]["name"])
    except emulate.EmulationError as exc:
        argv, rc, failure = [], None, f"emulated cluster: {exc}"
    except LaunchError as exc:
        argv, rc, failure = [], None, str(exc)
    size = run["nodes"] * run["ranks_per_node"]
    problems, _ = check_run(run_dir, size, traced=run["timing"] == "native" and config["profile_iterations"] > 0)
    if failure:
        problems.insert(0, failure)
    status = {**run, "status": "failed" if problems else "ok", "reasons": problems, "returncode": rc,
              "elapsed_s": round(time.time() - started, 3), "argv": argv, "log": str(log_path)}
    if problems:
        text = log_path.read_text(errors="replace")
        error = first_error(text)
        if error:
            problems.insert(1 if failure else 0, f"first error: {error}")
        status["log_tail"] = text.splitlines()[-20:]
    (run_dir / STATUS).write_text(json.dumps(status, indent=2) + "\n")
    return status


def sweep_allreduce(config, nodes, ranks_per_node, env_record, out_path, log_path):
    """Run the allreduce sweep (harness.allreduce) on the run's hosts and ranks.

    A sweep that fails leaves one line in `out_path` saying why, so the study goes on.
    """
    from harness.allreduce import SCHEMA

    out_path, log_path = Path(out_path), Path(log_path)
    out_path.parent.mkdir(parents=True, exist_ok=True)
    _fresh_log(log_path)
    command = [env_record["python"], "-m", "harness.allreduce", str(out_path.resolve()),
               "--max-bytes", str(config["allreduce_max_bytes"]), "--device", config.get("device", "cpu")]
    try:
        with job(config, nodes, ranks_per_node, command) as (_, argv, proc_env, _cluster):
            rc, timed_out = execute(argv, log_path, config["run_timeout_s"], proc_env)
        failure = job_failure(rc, timed_out, config["run_timeout_s"], config["launcher"]["name"])
    except emulate.EmulationError as exc:
        failure = f"emulated cluster: {exc}"
    except LaunchError as exc:
        failure = str(exc)
    if failure:
        error = first_error(log_path.read_text(errors="replace"))
        out_path.write_text(json.dumps({"schema": SCHEMA, "failed": failure, "error": error,
                                        "nodes": nodes, "ranks_per_node": ranks_per_node}) + "\n")
