"""The order of a study's runs (config `design`), as speed drifts 2x within an hour on this project's VMs. `blocked`:
each repeat index a block in a seeded order of its own, so a slow spell hits a block's configurations alike; within
a block each configuration's cells (the runs the block model compares) run back to back, since neighbouring runs share
the machine's speed (bench/results/drift.csv). A place hashes seed, block and configuration: adding one keeps the
others' order. `unordered`: Snakemake's."""

import hashlib

from dlscale.core import paths
from dlscale.core.vocabulary import CELL

DEFAULT = {"order": "blocked", "seed": 1}
TOP = 10_000  # above every block's priority (a study has far fewer blocks)
COLUMNS = ["block", "position", "run"]
GROUPS = 2**20  # a configuration's place in [0, GROUPS), its cells' within it (a tie of two: 1 in 10^4 at 16)


def settings(config):
    """The study's design, its defaults filled in."""
    return {**DEFAULT, **(config.get("design") or {})}


def _hash(seed, block, text):
    digest = hashlib.sha256(f"{seed}:{block}:{text}".encode()).digest()
    return int.from_bytes(digest[:8], "big") / 2**64


def _place(run, seed):
    """A run's place within its block, in [0, 1): its configuration's seeded place, then its cell's within it."""
    cell = paths.run_path({**run, "repeat": 0})
    configuration = paths.run_path({**run, "repeat": 0, **dict.fromkeys(CELL, "")})
    group = int(_hash(seed, run["repeat"], configuration) * GROUPS)
    return (group + _hash(seed, run["repeat"], cell)) / GROUPS


def priority(run, design):
    """The run job's Snakemake priority (higher runs earlier): blocks in turn, each seeded; 0 unordered."""
    if design["order"] != "blocked":
        return 0
    return TOP - run["repeat"] - _place(run, design["seed"])


def order(runs, design):
    """The runs as the design orders them: rows of (block, position within the block, run path)."""
    if design["order"] != "blocked":
        return [{"block": r["repeat"], "position": "", "run": paths.run_path(r)} for r in runs]
    rows, position = [], {}
    for run in sorted(runs, key=lambda r: -priority(r, design)):
        k = position[run["repeat"]] = position.get(run["repeat"], -1) + 1
        rows.append({"block": run["repeat"], "position": k, "run": paths.run_path(run)})
    return rows
