"""The pipeline's process passes the stop signals it gets on to its rules' processes (rule.py), which stop
their MPI jobs and emulated clusters: Snakemake alone would wait for running jobs to finish."""

import contextlib
import os
import signal
from pathlib import Path

from dlscale.core import processes
from dlscale.runtime.execution import STOP_SIGNALS
from dlscale.runtime.rule import MODULE


def rules_processes(pid):
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
    """On a stop signal first stop every rule's process below this one, then do what was done before."""

    def forward(signum, frame, previous):
        for pid in rules_processes(os.getpid()):
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGTERM)
        if callable(previous):
            previous(signum, frame)
        elif previous == signal.SIG_DFL:
            signal.signal(signum, signal.SIG_DFL)
            os.kill(os.getpid(), signum)

    for sig in STOP_SIGNALS:
        previous = signal.getsignal(sig)
        signal.signal(sig, lambda signum, frame, previous=previous: forward(signum, frame, previous))
