"""The process that does a pipeline rule's work: one run, one allreduce sweep, one replay, or one
analysis step (tables, model, figures, report: `analysis_step`, with a time limit).

Snakemake runs a rule's `run:` block in a thread (of its own process under the workflow profile,
profiles/default; of a job process it spawns without it or under Slurm), where no signal handler
can be set, and on SIGTERM waits for running jobs to finish. So the MPI rules hand their work to a
process of their own, `python -m dlscale.runtime.rule` (its arguments as JSON on stdin, never through a
shell). It stops the MPI job and removes an emulated cluster when it gets SIGTERM, SIGINT or
SIGHUP, or when the process that started it dies, and then exits with 128 + the signal's number: the run is
left incomplete (no status.json; its files stay, with attempt.json saying it was interrupted), so
the next `snakemake` redoes it. The pipeline's own process passes the signals it gets on to these
processes (`forward_signals`, called from the Snakefile's `onstart`).

Under a cluster executor (profiles/slurm) the MPI jobs are cluster jobs, which Snakemake cancels on
Ctrl-C itself; imported by the Snakefile, this module makes it exit at once after that
(`end_status_waits_at_shutdown`).
"""

import asyncio
import contextlib
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

from dlscale.core import paths
from dlscale.runtime import launch
from dlscale.runtime.execution import GRACE_S, STOP_SIGNALS, Interrupted, die_with_parent, interruptible

MODULE = "dlscale.runtime.rule"


def in_own_process(step, timeout_s=None, name=None, **arguments):
    """Do `step` (one of STEPS) in a process of its own; raise if it did not finish, or if it took
    longer than timeout_s (then it is killed). `name` says which step in messages and in `ps`."""
    name = name or step
    payload = json.dumps({"step": step, "parent": os.getpid(), "arguments": arguments}, default=str)
    proc = subprocess.Popen([sys.executable, "-m", MODULE, name], stdin=subprocess.PIPE)
    try:
        proc.communicate(payload.encode(), timeout=timeout_s)
    except subprocess.TimeoutExpired:
        _stop(proc)
        raise RuntimeError(
            f"{name} did not finish within {timeout_s:g} s and was killed (config key "
            "step_timeout_s); its outputs are left incomplete"
        ) from None
    except BaseException:
        _stop(proc)
        raise
    if proc.returncode > 128 and proc.returncode - 128 in set(STOP_SIGNALS):
        raise RuntimeError(
            f"{name} interrupted by {signal.Signals(proc.returncode - 128).name}; "
            "it is left incomplete and the next snakemake run redoes it"
        )
    if proc.returncode != 0:
        raise RuntimeError(f"{name} failed (exit code {proc.returncode}); see the error above")


def _stop(proc):
    """SIGTERM (the step stops its own MPI job and cluster), then SIGKILL to what is left."""
    with contextlib.suppress(ProcessLookupError):
        os.kill(proc.pid, signal.SIGTERM)
    try:
        proc.wait(timeout=GRACE_S)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()


class Files(list):
    """A rule's input or output files as the step gets them in its own process: the list, and each
    named file (or list) as an attribute, like Snakemake's own."""

    def __init__(self, items, names):
        super().__init__(items)
        self.__dict__.update(names)


def files(namedlist):
    """A Snakemake input/output/log list as JSON for a step's process (see `Files`)."""
    return {"__files__": list(namedlist), "names": dict(namedlist.items())}


def _unpack(value):
    if isinstance(value, dict) and "__files__" in value:
        return Files(value["__files__"], value["names"])
    return value


def analysis_step(rule_name, function, *args, timeout_s):
    """A pipeline rule's analysis step, `function(*args)` (any importable function; Snakemake
    input/output/log lists passed through `files`), in a process of its own: Snakemake runs rules
    in threads of its process, where a step could neither be interrupted nor timed out."""
    target = f"{function.__module__}:{function.__qualname__}"
    in_own_process("call", timeout_s=timeout_s, name=f"rule {rule_name}", target=target, args=list(args))


def _call(target, args):
    import importlib

    module, _, name = target.partition(":")
    getattr(importlib.import_module(module), name)(*(_unpack(a) for a in args))


def _run(config, run, env_record, status, log, attempts):

    launch.launch(config, run, json.loads(Path(env_record).read_text()), status, log, attempts)


def _sweep(config, nodes, ranks_per_node, env_record, output, log, attempts):

    launch.sweep_allreduce(
        config, nodes, ranks_per_node, json.loads(Path(env_record).read_text()), output, log, attempts
    )


def _replay(config, nodes, plans, env_record, output, spec, log, attempts):

    launch.replay_gradients(config, nodes, plans, json.loads(Path(env_record).read_text()), output, spec, log, attempts)


STEPS = {"run": _run, "sweep": _sweep, "replay": _replay, "call": _call}


def _rules_processes(pid):
    """This process's descendants that are `python -m dlscale.runtime.rule` processes (from /proc)."""
    children = {}
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            ppid = int(stat.read_text().rsplit(")", 1)[1].split()[1])
        except (OSError, IndexError, ValueError):
            continue
        children.setdefault(ppid, []).append(int(stat.parent.name))
    found, todo = [], list(children.get(pid, []))
    while todo:
        child = todo.pop()
        todo += children.get(child, [])
        try:
            argv = Path(f"/proc/{child}/cmdline").read_bytes().split(b"\0")
        except OSError:
            continue
        if b"-m" in argv and MODULE.encode() in argv:
            found.append(child)
    return found


def forward_signals():
    """In the pipeline's main process: on SIGTERM, SIGINT or SIGHUP first stop every MPI rule's
    process below this one (each stops its job and its emulated cluster), then do what the process
    did before with that signal (Snakemake: exit after the running jobs, which now end at once)."""

    def forward(signum, frame, previous):
        for pid in _rules_processes(os.getpid()):
            try:
                os.kill(pid, signal.SIGTERM)
            except ProcessLookupError:
                pass
        if callable(previous):
            previous(signum, frame)
        elif previous == signal.SIG_DFL:
            signal.signal(signum, signal.SIG_DFL)
            os.kill(os.getpid(), signum)

    for sig in STOP_SIGNALS:
        previous = signal.getsignal(sig)
        signal.signal(sig, lambda signum, frame, previous=previous: forward(signum, frame, previous))


async def _sleep_until_shutdown(executor):
    """Snakemake's RemoteExecutor.sleep (the wait between two checks of the jobs' states), ended
    within a second once the executor stops waiting (shutdown clears `wait`, also on Ctrl-C)."""
    deadline = time.monotonic() + executor.next_seconds_between_status_checks
    while executor.wait and (left := deadline - time.monotonic()) > 0:
        await asyncio.sleep(min(left, 1.0))


def end_status_waits_at_shutdown():
    """In a snakemake process: a cluster executor's thread that checks the jobs' states sleeps
    between two checks, 40 s at first and 10 s more after each check in which no job ended, up to
    180 s (snakemake-executor-plugin-slurm 2.6.1 to 2.7.1), and Snakemake's shutdown, on Ctrl-C after
    scancel of its jobs and at the end of every run, waits for that thread: snakemake exited only when
    the sleep ran out (31 s after a Ctrl-C 11 s into a study on `dlscale slurm up`, 68 s after one
    154 s in). Make the sleep end within a second of the shutdown. Done when the Snakefile imports this
    module, before Snakemake makes its executor (whose thread starts sleeping at once)."""
    if "snakemake" not in sys.modules:  # a step's own process, or no Snakemake here
        return
    from snakemake_interface_executor_plugins.executors.remote import RemoteExecutor

    RemoteExecutor.sleep = _sleep_until_shutdown


end_status_waits_at_shutdown()


def main():
    request = json.loads(sys.stdin.read())
    try:
        with interruptible():
            die_with_parent(request["parent"])
            STEPS[request["step"]](**request["arguments"])
    except Interrupted as exc:
        print(f"dlscale: {' '.join(sys.argv[1:]) or request['step']} {exc}; stopped", file=sys.stderr, flush=True)
        return 128 + exc.signum
    return 0


if __name__ == "__main__":
    sys.exit(main())


# The pipeline's MPI rules call these with their declared files (rules/runs.smk, allreduce.smk,
# replay.smk).
def run_rule(config, wildcards, input, output, log, params):
    """The pipeline's `run` rule (rules/runs.smk): the run its wildcards name, with its declared
    files, in a process of its own that stops the MPI job on a signal (this module)."""
    _mpi_rule("run", config, input, log, params, run=paths.run_from_wildcards(wildcards), status=output[0])


def sweep_rule(config, wildcards, input, output, log, params):
    """The pipeline's `allreduce` rule (rules/allreduce.smk), with its declared files, likewise."""
    place = {"nodes": int(wildcards.nodes), "ranks_per_node": int(wildcards.ranks_per_node)}
    _mpi_rule("sweep", config, input, log, params, **place, output=output[0])


def replay_rule(config, wildcards, input, output, log, params):
    """The pipeline's `replay` rule (rules/replay.smk), with its declared files, likewise."""
    files = {"plans": input.plans, "output": output.out, "spec": output.spec}
    _mpi_rule("replay", config, input, log, params, nodes=int(wildcards.nodes), **files)


def _mpi_rule(step, config, input, log, params, **arguments):
    """What every MPI rule hands its step: the study, the environment record, its log and where its
    earlier attempts go, and its own `arguments`."""
    in_own_process(
        step,
        config=dict(config),
        env_record=input.env,
        log=log[0],
        attempts=params.attempts,
        **arguments,
    )
