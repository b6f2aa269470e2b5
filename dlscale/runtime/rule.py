"""The process that does a pipeline rule's work.

Every rule's `run:` block is one line, `step(rule, FUNCTION, input, output, params, log, resources)`
(rules/common.smk), and every FUNCTION takes one `Job`: the rule's declared input, output, params,
log and resources, as a Snakemake script gets them. A step reads nothing else of the study: each
config value it needs is a declared param (a change remakes the step) or, for a time limit, a
resource (a longer limit remakes nothing). The runtime's steps are dlscale/runtime/rule_steps.py's
(run, allreduce, replay, peak, dataset, environment, framework_environment); the analysis's are
dlscale/analysis/steps.py's.

Snakemake runs a rule's `run:` block in a thread (of its own process under the workflow profile,
profiles/default; of a job process it spawns without it or under Slurm), where no signal handler
can be set, and on SIGTERM waits for running jobs to finish. So the MPI rules hand their work to a
process of their own, `python -m dlscale.runtime.rule` (its arguments as JSON on stdin, never through a
shell). It stops the MPI job and removes an emulated cluster when it gets SIGTERM, SIGINT or
SIGHUP, or when the process that started it dies, and then exits with 128 + the signal's number: the run is
left incomplete (no status.json; its files stay, with attempt.json saying it was interrupted), so
the next `snakemake` redoes it. The pipeline's own process passes the signals it gets on to these
processes (dlscale/runtime/signals.py, called from the Snakefile's `onstart`).
"""

import contextlib
import dataclasses
import json
import os
import signal
import subprocess
import sys

from dlscale.core.errors import ConfigError
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


def step(rule_name, function, declared, timeout_s=None):
    """A pipeline rule's work, `function(Job)`, in a process of its own (Snakemake runs rules in
    threads of its process, where a step could neither be interrupted nor timed out), killed after
    timeout_s where given; `declared`: the rule's lists in PARTS' order (input, output, params, log,
    resources)."""
    if len(declared) != len(PARTS):
        raise TypeError(f"rule {rule_name}: expected its {', '.join(PARTS)}, got {len(declared)} lists")
    target = f"{function.__module__}:{function.__qualname__}"
    job = {part: files(lists) for part, lists in zip(PARTS, declared)}
    in_own_process(target, job, f"rule {rule_name}", timeout_s)


def _call(target, job):
    # the step's module is known by name only, in its own process
    import importlib

    module, _, name = target.partition(":")
    function = getattr(importlib.import_module(module), name)
    function(Job(**{part: _unpack(job[part], part) for part in PARTS}))


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
