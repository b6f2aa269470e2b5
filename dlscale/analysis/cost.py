"""Where a run's wall time goes: parts in sequence summing to its elapsed time, each ending at the last rank's
point (the run goes on when all reach it); a run recorded before the startup stamps has launch to data as `start`."""

import json
from pathlib import Path

from dlscale.core.records import parse_file, utc_epoch
from dlscale.core.vocabulary import STATUS

STARTUP = ("launch", "interpreter", "import", "build", "data")  # `start`, split where recorded
AFTER = ("warmup", "timed", "profiled", "teardown")
PARTS = ("start", *STARTUP, *AFTER, "compile")
_STAMPS = ("process", "harness", "imported", "built")  # the run record's `startup`; then its own time


class CostError(ValueError):
    pass


def _rank(path):
    """(run record, last warm-up step's time, last measured step's time, end record) of a rank's file."""
    records, errors = parse_file(path)
    if errors:
        raise CostError(errors[0])
    by_kind = {kind: [r for r in records if r["kind"] == kind] for kind in ("run", "step", "end")}
    if not by_kind["run"] or not by_kind["end"]:
        raise CostError(f"{path}: the rank did not finish (no run or end record)")
    warm = [s["time"] for s in by_kind["step"] if s["warmup"]]
    timed = [s["time"] for s in by_kind["step"] if not s["warmup"] and not s["profiled"]]
    run = by_kind["run"][0]
    return run, max(warm, default=run["time"]), max(timed, default=run["time"]), by_kind["end"][0]


def run_cost(run_dir):
    """{part: seconds} of the finished run in `run_dir` (see the module), with its `elapsed` and `ranks`."""
    run_dir = Path(run_dir)
    status = json.loads((run_dir / STATUS).read_text())
    ranks = [_rank(p) for p in sorted(run_dir.glob("rank*.jsonl"))]
    if status.get("status") != "ok" or not ranks:
        raise CostError(f"{run_dir}: not an ok run with records")
    began = utc_epoch(status["started"])
    stamped = all("startup" in run for run, *_ in ranks)
    points = [began, *(max(r[0]["startup"][s] for r in ranks) for s in (_STAMPS if stamped else ()))]
    points += [max(r[0]["time"] for r in ranks), *(max(r[i] for r in ranks) for i in (1, 2))]
    points += [max(r[3]["time"] for r in ranks), began + status["elapsed_s"]]
    spans = [b - a for a, b in zip(points, points[1:])]
    cost = {"start": sum(spans[: -len(AFTER)]), **dict(zip(AFTER, spans[-len(AFTER) :]))}
    if stamped:
        cost.update(zip(STARTUP, spans))
    cost["compile"] = max(sum(c["s"] for c in r[3].get("compile", {}).values()) for r in ranks)
    return {"elapsed": status["elapsed_s"], "ranks": len(ranks), **cost}
