"""Copies of a run that must measure at the same time: the contention calibration's (independent
1-rank runs at once on one node: dlscale/runtime/contention.py), which start apart by their import
and compile times (up to 2 s seen) and end apart by their speeds.

With `start_together` in the spec (a folder and how many copies), each copy meets the others after
its warm-up (`meet`, outside any iteration's time) and, once it has measured, keeps the node as busy
as before with unrecorded steps until every copy has measured (`keep_company`): every measured
iteration of every copy ran beside the others. Marks are the copies' run folder names in
<folder>/start and <folder>/done. A copy that never comes (it failed) ends the wait with an error
after MEET_TIMEOUT_S, never a hang.
"""

import time
from pathlib import Path

MEET_TIMEOUT_S = 600


def _mark(together, out, stage):
    folder = Path(together["dir"]) / stage
    folder.mkdir(parents=True, exist_ok=True)
    (folder / Path(out).name).touch()
    return folder


def _all_there(folder, together, deadline):
    if time.monotonic() > deadline:
        raise RuntimeError(f"start_together: {together['count']} copies never all reached {folder}")
    return len(list(folder.iterdir())) >= together["count"]


def meet(together, out):
    """A wait until every copy has finished its warm-up; a no-op without `together`."""
    if not together:
        return lambda: None

    def wait():
        folder, deadline = _mark(together, out, "start"), time.monotonic() + MEET_TIMEOUT_S
        while not _all_there(folder, together, deadline):
            time.sleep(0.002)

    return wait


def keep_company(trainer, data, together, out, iteration):
    """Unrecorded steps (from `iteration` on) until every copy has measured; returns how many."""
    if not together:
        return 0
    folder, deadline, steps = _mark(together, out, "done"), time.monotonic() + MEET_TIMEOUT_S, 0
    while not _all_there(folder, together, deadline):
        trainer.finish(trainer.queued(trainer.step(lambda it=iteration + steps: data(it))))
        steps += 1
    return steps
