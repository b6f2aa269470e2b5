"""The order a study's runs take (config `design`): on a shared machine the speed drifts, by 2x within
an hour on this project's VMs, so the order decides what a comparison measures.

`blocked`: a block is one repeat index, each block in a seeded random order of its own, so a slow
spell falls on all configurations of a block alike and a comparison within blocks cancels it.
`unordered`: Snakemake's own order. The order is each run job's Snakemake priority; a run's place is a
hash of the seed, the block and the configuration, so adding a configuration keeps the others' order.
"""

import hashlib

from dlscale.core import paths

DEFAULT = {"order": "blocked", "seed": 1}
TOP = 10_000  # above every block's priority (a study has far fewer blocks)
COLUMNS = ["block", "position", "run"]


def settings(config):
    """The study's design, its defaults filled in."""
    return {**DEFAULT, **(config.get("design") or {})}


def _place(run, seed):
    """A run's place within its block, in [0, 1)."""
    configuration = paths.run_path({**run, "repeat": 0})
    digest = hashlib.sha256(f"{seed}:{run['repeat']}:{configuration}".encode()).digest()
    return int.from_bytes(digest[:8], "big") / 2**64


def priority(run, design):
    """The run job's Snakemake priority (higher runs earlier): blocks first to last, each in its seeded
    order; 0 for an unordered design."""
    if design["order"] != "blocked":
        return 0
    return TOP - run["repeat"] - _place(run, design["seed"])


def order(runs, design):
    """The runs as the design orders them: rows of (block, position within the block, run path)."""
    if design["order"] != "blocked":
        return [{"block": r["repeat"], "position": "", "run": paths.run_path(r)} for r in runs]
    ranked = sorted(runs, key=lambda r: -priority(r, design))
    rows, position = [], {}
    for run in ranked:
        k = position[run["repeat"]] = position.get(run["repeat"], -1) + 1
        rows.append({"block": run["repeat"], "position": k, "run": paths.run_path(run)})
    return rows
