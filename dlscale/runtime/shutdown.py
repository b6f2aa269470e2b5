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
    """Make a cluster executor's status sleep end within a second of shutdown. It sleeps 40 s, then 10 s
    more after each check in which no job ended, up to 180 s (snakemake-executor-plugin-slurm 2.6.1-2.7.1),
    and shutdown (on Ctrl-C and at every run's end) waits for it: 31 s after a Ctrl-C 11 s into a study,
    68 s after one 154 s in. Called before Snakemake makes its executor, whose thread sleeps at once."""
    if "snakemake" not in sys.modules:  # a step's own process, or no Snakemake here
        return
    from snakemake_interface_executor_plugins.executors.remote import RemoteExecutor  # only in snakemake

    RemoteExecutor.sleep = _sleep_until_shutdown
