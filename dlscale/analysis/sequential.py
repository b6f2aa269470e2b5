"""`design.until_resolved`: each look (a checkpoint) adds a block to the configurations left unresolved, closest to
an answer first, within the budget; each of the L looks tests at ALPHA / L. Docs: docs/concepts/statistics.md."""

import math

import pandas as pd

from dlscale.analysis import blocks
from dlscale.analysis.verdicts import ALPHA
from dlscale.core.vocabulary import MATRIX_KEYS
from dlscale.runtime import progress

ADDED, ANSWERED, BUDGET, LAST = "block added", "every pair resolved", "budget spent", "max_blocks reached"
NOISE, NO_LOOK = "within the noise", "no look left"  # a look's decision for a configuration
CONFIG = [k for k in MATRIX_KEYS if k not in blocks.CELL]  # a configuration of the block model, by matrix keys
COLUMNS = blocks.KEYS + ["look", "blocks", "pairs", "unresolved", "blocks_needed", "run_s", "alpha", "decision"]


def looks(settings, repeats):
    """How many analyses the study may make: at repeats, repeats + 1, ..., max_blocks blocks."""
    return max(int(settings["max_blocks"]) - int(repeats), 0) + 1


def alpha(design, repeats):
    """The error each analysis of the study's comparisons tests at: ALPHA split over the looks, or ALPHA."""
    settings = (design or {}).get("until_resolved")
    return ALPHA / looks(settings, repeats) if settings else ALPHA


def plan(run_metrics, status, look, settings, repeats, final=False):
    """Look `look` (from 0): per configuration, its unresolved pairs and whether block repeats + look is added;
    `final`: after the last look, why each stays unresolved."""
    level = ALPHA / looks(settings, repeats)
    rows, table = blocks.pair_rows(run_metrics, level)
    rows = pd.concat([rows, blocks.decide(rows, level)], axis=1) if len(rows) else rows
    added = status[status["repeat"] >= repeats]
    spent = float(pd.to_numeric(added["elapsed_s"], errors="coerce").fillna(0).sum())  # by the blocks added so far
    budget_s = 60.0 * float(settings["budget_minutes"]) - spent
    out = []
    for model in table.to_dict("records"):
        key = {k: model[k] for k in blocks.KEYS}
        mine = rows[_matches(rows, key)] if len(rows) else rows
        open_ = mine[mine["verdict"] == "unresolved"] if len(mine) else mine
        # the closest pair decides: one resolvable within max_blocks is worth a block though others never will be
        needed = float(open_["blocks_needed"].min()) if len(open_) else math.nan
        row = {**key, "look": look, "blocks": model["blocks"], "pairs": len(mine), "unresolved": len(open_)}
        decision = _decision(len(open_), needed, model["blocks"], int(settings["max_blocks"]))
        out.append(row | {"blocks_needed": needed, "run_s": _cost(status, key), "alpha": level, "decision": decision})
    planned = _within_budget(pd.DataFrame(out, columns=COLUMNS), budget_s)
    if final:  # nothing more runs: a block it would still get was not looked for
        planned["decision"] = planned["decision"].replace(ADDED, NO_LOOK)
    return planned


def _decision(unresolved, needed, blocks_so_far, max_blocks):
    """Before the budget: whether a configuration wants another block, or why not."""
    if not unresolved:
        return ANSWERED
    if blocks_so_far >= max_blocks:
        return LAST
    return NOISE if needed > max_blocks else ADDED


def _within_budget(planned, budget_s):
    for i in planned[planned["decision"] == ADDED].sort_values(["blocks_needed", "run_s"]).index:
        cost = planned.at[i, "run_s"]
        if cost > budget_s:
            planned.at[i, "decision"] = BUDGET
        else:
            budget_s -= cost
    return planned


def _matches(table, key):
    mask = pd.Series(True, index=table.index)
    for k, v in key.items():
        mask &= (table[k] == v) | (table[k].isna() & pd.isna(v))
    return mask


def _cost(status, key):
    """A whole block of one configuration: a run of each of its cells, predicted as the progress line does."""
    runs = status.assign(ranks=status["nodes"] * status["ranks_per_node"])
    cells = runs[_matches(runs, key)].drop_duplicates(blocks.CELL)
    return progress.predicted_s(status.to_dict("records"), cells.to_dict("records")) or 0.0


def added_runs(matrix, planned, block):
    """The runs (identity dicts of the first pass's `matrix`) of block `block` that `planned` adds."""
    chosen = {_config(r) for r in planned[planned["decision"] == ADDED].to_dict("records")}
    return [{**run, "repeat": block} for run in matrix if run["repeat"] == 0 and _config(run) in chosen]


def _config(row):
    return tuple(str(row[k]) for k in CONFIG)
