"""Steps for tests/test_interrupts.py that `dlscale.runtime.rule.step` can import by name in its own
process (a test module itself is imported by pytest under a name no other process knows)."""

import time
from pathlib import Path


def write_what_it_got(job):
    """Writes what the step got of its rule's declared lists."""
    Path(job.output[0]).write_text(
        f"{job.input.tidy} {job.input.figures} {len(job.input)} {job.params.settings} {job.resources.run_timeout_s}"
    )


def sleep(job):
    time.sleep(job.params.seconds)
