"""A patch of Snakemake's cluster executor, applied by the Snakefile as the workflow starts (once,
before Snakemake makes its executor, whose thread starts sleeping at once).

Under a cluster executor (profiles/slurm) the MPI jobs are cluster jobs, which Snakemake cancels on
Ctrl-C itself; without the patch it then waits out its status thread's sleep before it exits."""

import asyncio
import sys
import time


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
    154 s in). Make the sleep end within a second of the shutdown. The Snakefile calls this first,
    before Snakemake makes its executor (whose thread starts sleeping at once)."""
    if "snakemake" not in sys.modules:  # a step's own process, or no Snakemake here
        return
    from snakemake_interface_executor_plugins.executors.remote import RemoteExecutor  # only in snakemake

    RemoteExecutor.sleep = _sleep_until_shutdown
