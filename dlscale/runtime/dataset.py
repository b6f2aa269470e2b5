"""The pipeline's `dataset` rule: the study's training images made (or converted from the user's tree)."""

import os
from pathlib import Path

from dlscale.core.paths import SOURCE
from dlscale.runtime.config import DATA_SHARDS, resolve
from dlscale.runtime.execution import execute
from dlscale.workloads import images


def prepare_rule(settings, python, manifest, log, writers):
    """`images prepare` in a process of its own, each format of `writers` ({framework: Python}) in that Python."""
    data = settings["data"]
    argv = [python, "-m", images.__name__, "prepare", str(Path(manifest).parent)]
    argv += ["--images", str(data.get("images", 1000)), "--classes", str(settings["classes"])]
    argv += ["--seed", str(settings["seed"]), "--shards", str(data.get("shards", DATA_SHARDS))]
    argv += ["--on-corrupt", data.get("on_corrupt", "fail")]
    if data.get("path"):
        argv += ["--tree", str(resolve(data["path"]))]
    argv += [f"--python={framework}={path}" for framework, path in sorted(writers.items())]
    argv += [] if writers else ["--no-formats"]
    Path(log).parent.mkdir(parents=True, exist_ok=True)
    Path(log).write_text("")
    rc, _ = execute(argv, log, None, {**os.environ, "PYTHONPATH": str(SOURCE), "TF_CPP_MIN_LOG_LEVEL": "2"})
    if rc:
        lines = Path(log).read_text(errors="replace").splitlines()
        errors = [ln for ln in lines if "Error" in ln.split(":", 1)[0]]
        raise RuntimeError(
            f"preparing the training images failed: {(errors or lines or ['no output'])[-1]} (log: {log})"
        )
