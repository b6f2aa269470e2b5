"""The process that does a pipeline rule's work (`step`). Snakemake runs `run:` blocks in threads, where no
signal handler can be set, and on SIGTERM waits for running jobs; so a step runs in a process of its own,
which on a stop signal or its parent's death stops its MPI job and emulated cluster and exits 128 + signal.
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
    """`target` (module:function) called with `job` in process `name`; raises if it fails or times out."""
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
    """One of a rule's declared lists in the step's process: a list with its named entries as attributes."""

    def __init__(self, items, names):
        super().__init__(items)
        self.__dict__.update(names)


def files(declared):
    """A Snakemake declared list (or a plain list or dict) as JSON for a step's process (see `Files`)."""
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
        """A Job from lists or dicts by part name (a part not given is empty)."""
        return cls(**{part: _unpack(files(declared.get(part, [])), part) for part in PARTS})


def _unpack(value, part):
    if not isinstance(value, dict) or "__files__" not in value:
        raise TypeError(f"a rule's {part}: expected its declared list, got {value!r}")
    return Files(value["__files__"], value["names"])


def step(rule_name, function, declared, timeout_s=None):
    """A rule's work, `function(Job)`, in a process of its own killed after timeout_s; `declared` in PARTS' order."""
    if len(declared) != len(PARTS):
        raise TypeError(f"rule {rule_name}: expected its {', '.join(PARTS)}, got {len(declared)} lists")
    target = f"{function.__module__}:{function.__qualname__}"
    job = {part: files(lists) for part, lists in zip(PARTS, declared)}
    in_own_process(target, job, f"rule {rule_name}", timeout_s)


def _call(target, job):
    import importlib  # the step's module is known by name only, in its own process

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
