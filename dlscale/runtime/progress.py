"""How far a study has got, said after each run: runs done, blocks complete, and the runs left's predicted time
(the mean of runs done of the same configuration, else of the same framework and rank count, else of all)."""

import json
import math
import statistics
from pathlib import Path

from dlscale.core import paths
from dlscale.core.vocabulary import MATRIX_KEYS


def _configuration(run):
    return tuple(run[k] for k in MATRIX_KEYS)  # a run without its repeat (block)


def _framework_ranks(run):
    return run["framework"], run["nodes"] * run["ranks_per_node"]


def predicted_s(done, todo):
    """Seconds the runs `todo` (identities) will take, from the status dicts `done`; None before any ended."""
    done = [s for s in done if isinstance(s.get("elapsed_s"), (int, float)) and math.isfinite(s["elapsed_s"])]
    if not done:
        return None
    groups = {}
    for status in done:
        for key in (_configuration, _framework_ranks):
            groups.setdefault((key.__name__, key(status)), []).append(status["elapsed_s"])

    def one(run):
        for key in (_configuration, _framework_ranks):
            if (key.__name__, key(run)) in groups:
                return statistics.mean(groups[key.__name__, key(run)])
        return statistics.mean(s["elapsed_s"] for s in done)

    return sum(one(run) for run in todo)


def _read(status_path):
    try:
        return json.loads(Path(status_path).read_text())
    except (OSError, ValueError):  # not run yet (or being written: it is replaced whole)
        return None


def line(status_paths):
    """One line on the study whose runs' status files are `status_paths` (those planned so far)."""
    runs = [(paths.run_from_path(Path(p).parent), _read(p)) for p in status_paths]
    done = [s for _, s in runs if s]
    failed = sum(s.get("status") != "ok" for s in done)
    blocks = sorted({run["repeat"] for run, _ in runs})
    complete = sum(all(s for run, s in runs if run["repeat"] == b) for b in blocks)
    left = predicted_s(done, [run for run, s in runs if not s])
    text = f"dlscale: {len(done)} of {len(runs)} runs done"
    text += f" ({failed} failed)" if failed else ""
    text += f", {complete} of {len(blocks)} blocks complete"
    if left is not None and len(done) < len(runs):
        text += f"; the runs left take about {left / 60:.1f} min (what runs like them took so far)"
    return text
