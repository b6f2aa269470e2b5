"""Copies of a run (the contention calibration's) measuring in segments in one launch (separate launches'
starts were 31% of the study's run time), meeting before each: "together", all measure; "alone", copy 0."""

import time
from pathlib import Path

MEET_TIMEOUT_S = 600
KINDS = ("alone", "together")
IDLE_LOOK_S = 0.01  # how often a copy waiting out another's alone segment looks (it uses no core between)


def order(trial):
    """A trial's two segments, which goes first alternating, so that a drift falls on both alike."""
    return list(KINDS if trial % 2 == 0 else KINDS[::-1])


def plan(trials):
    """The segments of `trials` trials in turn (alone, together, together, alone, ...)."""
    return [kind for t in range(trials) for kind in order(t)]


def abandon(folder, why):
    """Tell the copies waiting in `folder` that one of them failed (`why`): their waits end with it."""
    Path(folder).mkdir(parents=True, exist_ok=True)
    (Path(folder) / "FAILED").write_text(why)


class Segment:
    """One segment of a calibration copy (`calibration` in the spec), by its index in the plan."""

    def __init__(self, calibration, index, out):
        self.failed = Path(calibration["dir"]) / "FAILED"
        self.folder = Path(calibration["dir"]) / f"segment{index}"
        self.count, self.name = calibration["count"], Path(out).name
        self.kind = calibration["segments"][index]
        self.measures = self.kind == "together" or calibration["copy"] == 0

    def _mark(self, stage):
        folder = self.folder / stage
        folder.mkdir(parents=True, exist_ok=True)
        (folder / self.name).touch()
        return folder

    def _until(self, folder, count, step):
        """Call `step` until `count` copies have marked `folder`; an error after MEET_TIMEOUT_S."""
        deadline = time.monotonic() + MEET_TIMEOUT_S
        folder.mkdir(parents=True, exist_ok=True)
        while len(list(folder.iterdir())) < count:
            if self.failed.exists():
                raise RuntimeError(f"calibration: another copy failed ({self.failed.read_text()})")
            if time.monotonic() > deadline:
                raise RuntimeError(f"calibration: {count} copies never all reached {folder}")
            step()

    def meet(self):
        """Wait until every copy has reached this segment."""
        self._until(self._mark("start"), self.count, lambda: time.sleep(0.002))

    def wait(self):
        """A copy that does not measure this (alone) segment: idle until copy 0 has measured it."""
        self._until(self.folder / "done", 1, lambda: time.sleep(IDLE_LOOK_S))

    def keep_company(self, trainer, data, iteration):
        """Mark this segment measured; if together, unrecorded steps until every copy has: how many."""
        folder, steps = self._mark("done"), 0
        if self.kind != "together":
            return 0

        def step():
            nonlocal steps
            trainer.finish(trainer.queued(trainer.step(lambda it=iteration + steps: data(it))))
            steps += 1

        self._until(folder, self.count, step)
        return steps
