"""Shrinking a shipped study so that the tests can run it the way users do, through the Snakefile to
the report: the same `snakemake --configfile config/X.yaml` with one more overlay that keeps what
makes the study itself (frameworks, comm modes, timing, layouts, node and rank counts, loader
workers, device, launcher, emulated link, replays) and makes it small (a tiny network, 1-2
iterations, 1 repeat, few small images, small sweeps)."""

import subprocess
from pathlib import Path

import yaml

from dlscale.runtime import config as cfg
from tests.conftest import ROOT, SMALL_MATMUL, SNAKEMAKE


def shrink(config, folder):
    """The overlay that shrinks the study `config` (already layered) to run under `folder`."""
    folder = Path(folder)
    small = {
        "model": ["tinynet"],
        "repeats": 1,
        "warmup": 1,
        "iterations": 2,
        "batch_size": [4],
        "image_size": 64,
        "classes": 10,
        # one thread, or the study's threads where they are its dimension (one rank against two, say)
        "threads_per_rank": cfg.threads(config) if len(cfg.threads(config)) > 1 else 1,
        "run_timeout_s": 300,
        "step_timeout_s": 600,
        "allreduce_max_bytes": 1 << 16,
        "matmul_size": SMALL_MATMUL,
        "profile_iterations": min(config["profile_iterations"], 1),
        # no calibration: each would add its copies' runs to every shrunk study (the calibration through the
        # pipeline is tests/test_pipeline.py's and tests/test_compare.py's); its table is still made, empty
        "contention": {"trials": 0},
        "results": str(folder / "results"),
        "logs": str(folder / "logs"),
    }
    data = config["data"]
    if data["kind"] == "images":  # at least one image per TFRecord shard
        small["data"] = {"images": max(16, data.get("shards", cfg.DATA_SHARDS)), "cache": str(folder / "data")}
    if config.get("replay"):  # the smallest replayed cluster
        small["replay"] = {
            "nodes": [min(config["replay"]["nodes"])],
            "iterations": 3,
            "warmup": 1,
            "models": ["tinynet"],
        }
    return small


def run_shrunk(configfiles, folder, extra=()):
    """`snakemake --configfile <configfiles> <shrinking overlay> [extra]` from the repository root, as
    a user runs the study; returns (completed process, the layered config it ran)."""
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    overlay = folder / "shrink.yaml"
    overlay.write_text(yaml.safe_dump(shrink(cfg.layered([cfg.resolve(f) for f in configfiles]), folder)))
    proc = subprocess.run(
        SNAKEMAKE + ["--configfile", *map(str, configfiles), str(overlay), *extra],
        cwd=ROOT,
        capture_output=True,
        text=True,
    )
    return proc, cfg.layered([*(cfg.resolve(f) for f in configfiles), overlay])
