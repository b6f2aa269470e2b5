"""The process that does a pipeline rule's work, and the runtime's rules.

Every rule's `run:` block is one line, `step(rule, FUNCTION, input, output, params, log, resources)`
(rules/common.smk), and every FUNCTION takes one `Job`: the rule's declared input, output, params,
log and resources, as a Snakemake script gets them. A step reads nothing else of the study: each
config value it needs is a declared param (a change remakes the step) or, for a time limit, a
resource (a longer limit remakes nothing). The runtime's rules are at the end of this module (run,
allreduce, replay, peak, dataset, environment, framework_environment); the analysis's are in
dlscale/analysis/steps.py.

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
import dataclasses
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

from dlscale.core import processes
from dlscale.core.errors import ConfigError
from dlscale.environment import build
from dlscale.runtime import contention as calibration
from dlscale.runtime import dataset, environments, launch, peak
from dlscale.runtime.execution import GRACE_S, STOP_SIGNALS, Interrupted, die_with_parent, interruptible

MODULE = "dlscale.runtime.rule"


def in_own_process(target, job, name, timeout_s=None):
    """`target` (module:function) called with `job` in a process of its own; raise if it did not
    finish, or if it took longer than timeout_s (then it is killed). `name` says which in messages
    and in `ps`."""
    payload = json.dumps({"target": target, "parent": os.getpid(), "job": job}, default=str)
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
    """One of a rule's declared lists (input, output, params, log, resources) as the step gets it in
    its own process: the list, and each named entry as an attribute, like Snakemake's own."""

    def __init__(self, items, names):
        super().__init__(items)
        self.__dict__.update(names)


def files(declared):
    """A Snakemake input/output/params/log/resources list (or a plain list or dict) as JSON for a
    step's process (see `Files`)."""
    if isinstance(declared, dict):  # a named list of lists is flat, as Snakemake's is
        flat = [item for v in declared.values() for item in (v if isinstance(v, list) else [v])]
        return {"__files__": flat, "names": dict(declared)}
    names = dict(declared.items()) if hasattr(declared, "items") else {}
    return {"__files__": list(declared), "names": names}


PARTS = ("input", "output", "params", "log", "resources")


@dataclasses.dataclass
class Job:
    """What a rule hands its step (`step`): its declared lists, each a `Files`."""

    input: Files
    output: Files
    params: Files
    log: Files
    resources: Files

    @classmethod
    def of(cls, **declared):
        """A Job from lists or dicts by part name (a part not given is empty), as a test or a
        command makes one; `step` makes it from the rule's own."""
        return cls(**{part: _unpack(files(declared.get(part, [])), part) for part in PARTS})


def _unpack(value, part):
    if not isinstance(value, dict) or "__files__" not in value:
        raise TypeError(f"a rule's {part}: expected its declared list, got {value!r}")
    return Files(value["__files__"], value["names"])


def step(rule_name, function, input, output, params, log, resources, timeout_s=None):
    """A pipeline rule's work, `function(Job)`, in a process of its own (Snakemake runs rules in
    threads of its process, where a step could neither be interrupted nor timed out), killed after
    timeout_s where given."""
    target = f"{function.__module__}:{function.__qualname__}"
    job = {part: files(declared) for part, declared in zip(PARTS, (input, output, params, log, resources))}
    in_own_process(target, job, f"rule {rule_name}", timeout_s)


def _call(target, job):
    # the step's module is known by name only, in its own process
    import importlib

    module, _, name = target.partition(":")
    function = getattr(importlib.import_module(module), name)
    function(Job(**{part: _unpack(job[part], part) for part in PARTS}))


def _rules_processes(pid):
    """This process's descendants that are `python -m dlscale.runtime.rule` processes (from /proc)."""
    found = []
    for child in processes.descendants(pid):
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
            _call(request["target"], request["job"])
    except Interrupted as exc:
        print(f"dlscale: {' '.join(sys.argv[1:]) or request['target']} {exc}; stopped", file=sys.stderr, flush=True)
        return 128 + exc.signum
    except ConfigError as exc:  # bad input: said in one line, no traceback
        print(f"dlscale: {' '.join(sys.argv[1:])}: {exc}", file=sys.stderr, flush=True)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())


# The runtime's rules (rules/runs.smk, allreduce.smk, replay.smk, analysis.smk's peak, data.smk,
# environment.smk), each `step`'s FUNCTION.
def _settings(job):
    """An MPI rule's declared settings, with its time limit (a resource)."""
    return {**json.loads(job.params.settings), "run_timeout_s": float(job.resources.run_timeout_s)}


def _record(job):
    return json.loads(Path(job.input.env).read_text())


def _records(apart):
    """{framework: environment record} from a rule's params.apart ({framework: record path}, JSON)."""
    return {fw: json.loads(Path(path).read_text()) for fw, path in json.loads(apart).items()}


def run(job):
    """`rule run`: the run params.run names, its status file output[0]."""
    launch.launch(_settings(job), job.params.run, _record(job), job.output[0], job.log[0], job.params.attempts)


def allreduce(job):
    """`rule allreduce`: the sweep on params.place (nodes, ranks_per_node)."""
    place = job.params.place
    apart = _records(job.params.apart)
    launch.sweep_allreduce(
        _settings(job), place["nodes"], place["ranks_per_node"], _record(job), job.output[0], job.log[0],
        job.params.attempts, apart,
    )  # fmt: skip


def replay(job):
    """`rule replay`: the replay of input.plans on params.nodes nodes."""
    launch.replay_gradients(
        _settings(job), job.params.nodes, job.input.plans, _record(job), job.output.out, job.output.spec,
        job.log[0], job.params.attempts,
    )  # fmt: skip


def contention(job):
    """`rule contention`: the calibration of params.run (its ranks_per_node the copies) in params.folder."""
    settings, run = _settings(job), job.params.run
    trials = settings["contention"]["trials"]
    calibration.calibrate(settings, run, run["ranks_per_node"], trials, _record(job), job.output[0], job.params.folder)


def peak_rule(job):
    """`rule peak`: the matrix-multiply peak (dlscale/runtime/peak.py) with params.settings."""
    apart = _records(job.params.apart)
    peak.rule(json.loads(job.params.settings), job.params.python, job.output[0], job.log[0], apart)


def dataset_rule(job):
    """`rule dataset`: the study's training images (dlscale/runtime/dataset.py) from params.data."""
    dataset.prepare_rule(
        json.loads(job.params.data), job.params.python, job.output[0], job.log[0], json.loads(job.params.writers)
    )


def framework_environment(job):
    """`rule framework_environment`: the Python params.python (the user's, or with params.build the
    framework's own environment, built here first) admitted for params.needs
    (dlscale/runtime/environments.py `admit`), its record output[0], or the study stopped."""
    declared = json.loads(job.params.needs)
    if job.params.build:
        build.record_rule(sys.executable, job.output[0], job.log[0], own=declared["framework"])
    with open(job.log[0], "a") as log:
        log.write(f"checking {job.params.python} for {job.params.needs}\n")
    environments.admit(job.params.python, declared, job.output[0], built=job.params.build)


def environment(job):
    """`rule environment`: the workload environment built or found, its record output[0]."""
    build.record_rule(job.params.python, job.output[0], job.log[0])
