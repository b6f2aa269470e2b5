"""A patch of Snakemake's cluster executor, applied by the Snakefile as the workflow starts: under a cluster
executor (profiles/slurm) Snakemake cancels its jobs on Ctrl-C itself, then waits out its status thread's sleep."""

import asyncio
import sys
import time


async def _sleep_until_shutdown(executor):
    """RemoteExecutor.sleep, ended within a second once shutdown clears `wait`."""
    deadline = time.monotonic() + executor.next_seconds_between_status_checks
    while executor.wait and (left := deadline - time.monotonic()) > 0:
        await asyncio.sleep(min(left, 1.0))


def end_status_waits_at_shutdown():
    """Make a cluster executor's status sleep (40 to 180 s, snakemake-executor-plugin-slurm 2.6.1-2.7.1), which
    shutdown waits for (31 s after a Ctrl-C 11 s into a study, 68 s at 154 s), end within a second of it.
    Called before Snakemake makes its executor, whose thread sleeps at once."""
    if "snakemake" not in sys.modules:  # a step's own process, or no Snakemake here
        return
    from snakemake_interface_executor_plugins.executors.remote import RemoteExecutor  # only in snakemake

    RemoteExecutor.sleep = _sleep_until_shutdown
