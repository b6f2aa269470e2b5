"""What sharing a node costs a rank's compute (the performance model's calibration): each trial launches
k copies of a 1-rank run on one node that measure copy 0 alone and all k together, which goes first
alternating so that drift falls on both. Launches vary (1.09 and 1.33 for one calibration): the trials'
spread carries that into the interval.
"""

import json
import shutil
import statistics
import tempfile
import threading
from pathlib import Path

from dlscale.core.records import parse_file
from dlscale.core.samples import steady_start
from dlscale.core.vocabulary import STATUS, records_name
from dlscale.runtime import launch, launchers
from dlscale.workloads import together

SCHEMA = "dlscale.contention/1"


def copies_of(settings, run, segments, folder, env_record):
    """Each copy's {segment index: [iteration s]}, from copies of the 1-rank run `run` (one per rank per
    node) started at once in folder/copy<i>; raises naming a copy that fails."""
    count, one = run["ranks_per_node"], {**run, "nodes": 1, "ranks_per_node": 1, "repeat": 0}
    meeting = Path(folder) / "meet"
    shutil.rmtree(meeting, ignore_errors=True)  # an earlier attempt's marks would let a copy start alone
    plan = {"dir": str(meeting), "count": count, "segments": list(segments)}
    # wall time is all a copy needs (no traces to write), over a fixed count in each segment
    quiet = {**settings, "profile_iterations": 0, "samples": None}
    statuses = [None] * count

    def start(i):
        where = Path(folder) / f"copy{i}"  # its log beside it: the run folder keeps a copy of its own
        try:
            # a short path: Open MPI puts its sockets there
            with tempfile.TemporaryDirectory(prefix="dlscale-copy-") as session:
                mine = {**quiet, "launcher": launchers.apart(quiet["launcher"], session)}
                mine["calibration"] = {**plan, "copy": i}
                statuses[i] = launch.launch(mine, one, env_record, where / STATUS, f"{where}.log", f"{where}.attempts")
        except Exception as exc:  # noqa: BLE001 (said in the calibration's output, never lost in a thread)
            statuses[i] = {"status": "failed", "reasons": [f"{type(exc).__name__}: {exc}"]}
        if statuses[i]["status"] != "ok":  # the other copies stop waiting for this one
            together.abandon(meeting, f"copy {i}: {'; '.join(statuses[i]['reasons'])}")

    threads = [threading.Thread(target=start, args=(i,)) for i in range(count)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    for i, status in enumerate(statuses):
        if status is None or status["status"] != "ok":
            why = "; ".join(status["reasons"]) if status else "it did not start"
            raise RuntimeError(f"copy {i} of {count} failed: {why}")
    return [_segments(Path(folder) / f"copy{i}") for i in range(count)]


def _segments(run_dir):
    """A calibration copy's {segment index: measured iteration s}, not yet steady iterations left out."""
    records, errors = parse_file(run_dir / records_name(0))
    if errors:
        raise RuntimeError(f"{run_dir}: {errors[0]}")
    out = {}
    for r in records:
        if r["kind"] == "step" and not r["warmup"]:
            out.setdefault(r["segment"], []).append(r["wall_s"])
    return {k: times[steady_start(times) :] for k, times in out.items()}


def calibrate(settings, run, env_record, out_path, folder):
    """A line in out_path per trial of the 1-rank run `run`; a failure ends it with a line saying why."""
    trials = settings["contention"]["trials"]
    out_path, folder = Path(out_path), Path(folder)
    out_path.parent.mkdir(parents=True, exist_ok=True)
    with open(out_path, "w") as out:
        for trial in range(trials):
            kinds = together.order(trial)
            try:
                copies = copies_of(settings, run, kinds, folder / f"trial{trial}", env_record)
            except RuntimeError as exc:
                out.write(json.dumps({"schema": SCHEMA, "trial": trial, "failure": str(exc)}) + "\n")
                return
            out.write(json.dumps(_trial(trial, kinds, copies)) + "\n")
            out.flush()


def _trial(trial, kinds, copies):
    """A trial's line from its copies' segments: copy 0's alone and every copy's together."""
    alone, shared = kinds.index("alone"), kinds.index("together")
    means = [statistics.mean(segments[shared]) for segments in copies]
    line = {"schema": SCHEMA, "trial": trial, "first": kinds[0], "copies": len(copies)}
    line["alone_s"] = statistics.mean(copies[0][alone])
    return line | {"together_s": statistics.mean(means), "together_max_s": max(means)}
