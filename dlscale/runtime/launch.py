"""Launch one run, allreduce sweep or replay as one MPI job; keep its logs and record whether it ran right in
status.json and attempt.json (kept with the attempt when redone; an interrupted run writes only it). A failed
run never stops the study; a redone one first moves its files to a new attempts folder: nothing is deleted."""

import dataclasses
import json
import shutil
import time
from pathlib import Path

from dlscale.core import paths, version
from dlscale.core.records import IDENTITY, utc_stamp
from dlscale.core.vocabulary import ATTEMPT, LOG, RUN_KEYS, SPEC, STATUS
from dlscale.runtime import allreduce, emulate, replay
from dlscale.runtime import config as cfg
from dlscale.runtime.checks import check_run, first_error
from dlscale.runtime.execution import Interrupted, LaunchError, execute, job, job_failure
from dlscale.workloads.frameworks import thread_env  # re-exported: a rank's compute threads, for every framework


def workload_command(python, spec_path):
    """The program every rank of a training run executes."""
    return [str(python), "-m", "dlscale.workloads.train", str(spec_path)]


def run_spec(settings, run, out_dir):
    """The complete description of one run handed to every rank (spec.json), from its own settings."""
    spec = {k: settings[k] for k in IDENTITY if k in settings} | run
    keys = ("warmup", "iterations", "profile_iterations", "autotune", "tf32", "lr", "momentum", "seed", "device")
    spec.update({k: settings[k] for k in keys})
    # calibration: a contention calibration copy's segments
    spec.update({k: settings[k] for k in ("samples", "calibration") if settings.get(k)})
    folder = cfg.dataset_folder(settings)
    spec["data"] = {**settings["data"], "folder": str(folder)} if folder else dict(settings["data"])
    spec["out_dir"] = str(out_dir)
    return spec


def math_env(autotune, tf32):
    """The same math libraries, cuDNN autotuning and TF32 setting for every framework (NVIDIA's TF32 override
    reaches MXNet's cuBLAS and cuDNN). oneDNN is asked for: TensorFlow turns it on by default only on CPUs
    with AVX-512 VNNI/BF16 or AMX, and without it ResNet-50 trains 2.8x slower on an AVX2 machine."""
    tune = str(int(autotune))
    env = {"TF_ENABLE_ONEDNN_OPTS": "1", "TF_CUDNN_USE_AUTOTUNE": tune, "MXNET_CUDNN_AUTOTUNE_DEFAULT": tune}
    if not tf32:
        env["NVIDIA_TF32_OVERRIDE"] = "0"
    return env


def rank_env(job_plan):
    """Every rank's environment in this JobPlan's job (Horovod's timeline DYNAMIC: chosen iterations only)."""
    return {
        **thread_env(job_plan.threads_per_rank),
        **math_env(job_plan.autotune, job_plan.tf32),
        "PYTHONPATH": str(paths.SOURCE),
        "HOROVOD_TIMELINE": "DYNAMIC",
        **{k: str(v) for k, v in job_plan.launcher.get("env", {}).items()},
    }


def _write_json(path, obj):
    """Write whole or not at all (a signal mid-write leaves no half file)."""
    tmp = path.with_name(f".{path.name}.tmp")
    tmp.write_text(json.dumps(obj, indent=2) + "\n")
    tmp.replace(path)


def _fresh_log(path):
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("")


def _new_attempt(attempts_root):
    """A new folder name under attempts_root for an earlier attempt's files."""
    stamp = time.strftime("%Y%m%dT%H%M%S")
    dest, n = Path(attempts_root) / stamp, 1
    while dest.exists():
        n += 1
        dest = Path(attempts_root) / f"{stamp}-{n}"
    return dest


def _keep_previous(run_dir, attempts_root):
    """Move an earlier attempt's folder to a new attempts folder (attempt.json becoming status.json)."""
    if run_dir.exists() and any(run_dir.iterdir()):
        dest = _new_attempt(attempts_root)
        dest.parent.mkdir(parents=True, exist_ok=True)
        shutil.move(str(run_dir), str(dest))
        if (dest / ATTEMPT).exists():
            (dest / ATTEMPT).replace(dest / STATUS)
    run_dir.mkdir(parents=True, exist_ok=True)


@dataclasses.dataclass(frozen=True)
class Plan:
    """One run resolved from the study's config before its job starts."""

    run: dict
    settings: dict  # the study's config as this run sees it (with its own threads per rank)
    job: cfg.JobPlan  # how its MPI job runs, from the same settings
    run_dir: Path
    log: Path
    attempts: Path
    spec: dict
    command: list
    rank_env: dict
    traced: bool  # native timing with traced iterations: every rank must leave a trace


def complete(settings, run):
    """A run without its threads per rank (by hand, or an older identity) has the study's one number."""
    if "threads_per_rank" in run:
        return run
    threads = cfg.threads(settings)
    if len(threads) != 1:
        raise cfg.ConfigError(f"run {run}: which threads_per_rank of {threads}?")
    return {**run, "threads_per_rank": threads[0]}


def plan(study, run, env_record, status_path=None, log_path=None, attempts_root=None):
    """The run's Plan, from the study config or the `run` rule's settings (with its declared files)."""
    run = complete(study, run)
    settings = {**study, "threads_per_rank": run["threads_per_rank"]}
    job_plan = cfg.job_plan(settings)
    if status_path is None:
        run_dir, log_path, attempts_root = paths.run_files(settings, run)
    else:
        run_dir, log_path, attempts_root = Path(status_path).parent, Path(log_path), Path(attempts_root)
    return Plan(
        run=run,
        settings=settings,
        job=job_plan,
        run_dir=run_dir,
        log=log_path,
        attempts=attempts_root,
        spec=run_spec(settings, run, run_dir.resolve()),
        command=workload_command(env_record["python"], (run_dir / SPEC).resolve()),
        rank_env=rank_env(job_plan),
        traced=run["timing"] == "native" and settings["profile_iterations"] > 0,
    )


def launch(study, run, env_record, status_path=None, log_path=None, attempts_root=None):
    """Run one study run end to end (its `plan`, then its job); write and return its status."""
    p = plan(study, run, env_record, status_path, log_path, attempts_root)
    _keep_previous(p.run_dir, p.attempts)
    _fresh_log(p.log)
    started = time.time()
    argv, rc, failure = _run_job(p, env_record, started)
    problems, _ = check_run(p.run_dir, p.run["nodes"] * p.run["ranks_per_node"], traced=p.traced)
    if failure:
        problems.insert(0, failure)
    status = {
        **_identity(p),
        "status": "failed" if problems else "ok",
        "reasons": problems,
        "returncode": rc,
        "elapsed_s": round(time.time() - started, 3),
        "started": utc_stamp(started),  # UTC: the report's dates, and the order the runs really took
        "argv": argv,
        "log": str(p.log),
    }
    if problems:
        text = p.log.read_text(errors="replace")
        error = first_error(text)
        if error:
            problems.insert(1 if failure else 0, f"first error: {error}")
        status["log_tail"] = text.splitlines()[-20:]
    _write_json(p.run_dir / ATTEMPT, status)
    _write_json(p.run_dir / STATUS, status)
    return status


def _identity(p):
    """The run's identity as its status records it (every run key, from its spec)."""
    return {**{k: p.spec[k] for k in RUN_KEYS}, **p.run}


def _run_job(p, env_record, started):
    """Run the plan's MPI job (spec.json written once its hosts are known): (argv, returncode, failure or None)."""
    run, timeout_s = p.run, p.job.timeout_s
    try:
        with job(p.job, run["nodes"], run["ranks_per_node"], p.command, p.rank_env) as (hosts, argv, proc_env, cluster):
            spec = {**p.spec, "launch": _launch_facts(env_record, hosts, argv, cluster)}
            (p.run_dir / SPEC).write_text(json.dumps(spec, indent=2) + "\n")
            rc, timed_out = execute(argv, p.log, timeout_s, proc_env)
        failure = job_failure(rc, timed_out, timeout_s, p.job.launcher["name"])
    except (emulate.EmulationError, LaunchError) as exc:
        argv, rc = [], None
        failure = f"emulated cluster: {exc}" if isinstance(exc, emulate.EmulationError) else str(exc)
    except Interrupted as exc:  # attempt.json only, and raised on
        status = {
            **_identity(p),
            "status": "interrupted",
            "reasons": [str(exc)],
            "elapsed_s": round(time.time() - started, 3),
            "log": str(p.log),
        }
        _write_json(p.run_dir / ATTEMPT, status)
        raise
    finally:
        shutil.copyfile(p.log, p.run_dir / LOG)  # the declared log goes when Snakemake redoes the run
    return argv, rc, failure


def _launch_facts(env_record, hosts, argv, cluster):
    """How the run was launched (spec.json's `launch`)."""
    return {
        "argv": argv,
        "hosts": hosts,
        "mpi": env_record.get("mpi", {}),
        "pins": env_record.get("pins", {}),
        "environment": env_record.get("key"),
        "emulated": cluster.describe() if cluster else None,
        "dlscale": version.commit(),  # the code that ran it: a study's runs can span commits
    }


@dataclasses.dataclass(frozen=True)
class Measurement:
    """A sweep's or replay's MPI job in the Python of the environment record `env`, and its files."""

    nodes: int
    ranks_per_node: int
    env: dict
    out: Path
    log: Path
    attempts: Path


@dataclasses.dataclass(frozen=True)
class Program:
    """What every rank of a sweep or replay runs, `python -m module OUT *args`, and the schema its lines carry."""

    module: str
    args: list
    schema: str


def sweep_allreduce(settings, sweep, apart=None):
    """The allreduce sweep as the Measurement `sweep`, then each framework of `apart` ({framework: env record})."""
    job_plan = cfg.job_plan(settings)
    apart = {fw: record for fw, record in (apart or {}).items() if fw in cfg.swept_apart(settings)}
    here = [fw for fw in cfg.native(settings) if fw not in apart]
    measure(job_plan, sweep, _sweep_program(settings, job_plan, here))
    if job_plan.device == "gpu":
        return  # a GPU sweep times the horovod path only (dlscale/runtime/allreduce.py)
    for fw, record in apart.items():
        for binding in [False] * (fw in cfg.native(settings)) + [True] * (fw in cfg.horovod(settings)):
            _sweep_apart(settings, job_plan, dataclasses.replace(sweep, env=record), fw, binding)


def _sweep_apart(settings, job_plan, sweep, fw, binding):
    """One job in `sweep`'s Python timing `fw`'s native path or (`binding`) its Horovod binding's paths."""
    out_path, log_path = Path(sweep.out), Path(sweep.log)
    part, part_log = (p.with_name(f"{p.stem}.{fw}{p.suffix}") for p in (out_path, log_path))
    program = _sweep_program(settings, job_plan, [] if binding else [fw], fw if binding else None)
    measure(job_plan, dataclasses.replace(sweep, out=part, log=part_log), program)
    what = "Horovod binding" if binding else "native path"
    with open(out_path, "a") as out, open(log_path, "a") as log:
        out.write(part.read_text())
        log.write(f"\n--- {fw}'s {what}, in {sweep.env['python']} ---\n{part_log.read_text()}")
    part.unlink()
    part_log.unlink()


def _sweep_program(settings, job_plan, native, binding="reference"):
    """A sweep of `native`'s paths and the MPI and Horovod paths ("reference"), or a named binding's only."""
    args = ["--max-bytes", str(settings["allreduce_max_bytes"]), "--device", job_plan.device]
    args += ["--native", ",".join(native), "--instrument", cfg.instrument(settings) or "none"]
    args += ["--threads", str(job_plan.threads_per_rank)]  # a binding's framework at its ranks' threads
    if binding != "reference":
        args += ["--no-reference"] + (["--binding", binding] if binding else [])
    return Program("dlscale.runtime.allreduce", args, allreduce.SCHEMA)


def replay_gradients(settings, replayed, plans_path, spec_path):
    """Replay the study's 1-rank runs' gradient traffic as the Measurement `replayed`, its spec written to spec_path."""
    spec_path = Path(spec_path)
    plans = json.loads(Path(plans_path).read_text())
    _write_json(spec_path, {**settings["replay"], "instrument": cfg.instrument(settings), "plans": plans})
    program = Program("dlscale.runtime.replay", [str(spec_path.resolve())], replay.SCHEMA)
    measure(cfg.job_plan(settings), replayed, program)


def measure(job_plan, where, program):
    """Run the Program on the Measurement `where`, a failure ending its output; both files kept as an attempt."""
    out_path, log_path = Path(where.out), Path(where.log)
    out_path.parent.mkdir(parents=True, exist_ok=True)
    out_path.unlink(missing_ok=True)  # only this job's lines, never an earlier one's
    _fresh_log(log_path)
    command = [where.env["python"], "-m", program.module, str(out_path.resolve()), *program.args]
    try:
        try:
            with job(job_plan, where.nodes, where.ranks_per_node, command, rank_env(job_plan)) as (_, argv, env, _c):
                rc, timed_out = execute(argv, log_path, job_plan.timeout_s, env)
            failure = job_failure(rc, timed_out, job_plan.timeout_s, job_plan.launcher["name"])
        except (emulate.EmulationError, LaunchError) as exc:
            failure = f"emulated cluster: {exc}" if isinstance(exc, emulate.EmulationError) else str(exc)
        if failure:
            _end_with_failure(out_path, failure, first_error(log_path.read_text(errors="replace")), program, where)
    finally:
        dest = _new_attempt(where.attempts)
        dest.mkdir(parents=True)
        for path in (out_path, log_path):
            if path.exists():
                shutil.copyfile(path, dest / path.name)


def _end_with_failure(out_path, failure, error, program, where):
    """End a failed sweep's or replay's lines with one saying why; a line cut by the kill is not a record."""
    done = out_path.read_text() if out_path.exists() else ""
    line = {"schema": program.schema, "failed": failure, "error": error}
    line.update(nodes=where.nodes, ranks_per_node=where.ranks_per_node)
    out_path.write_text(done[: done.rfind("\n") + 1] + json.dumps(line) + "\n")
