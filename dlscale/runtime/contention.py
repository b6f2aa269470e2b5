"""What sharing a node costs a rank's compute, measured: the calibration the performance model
multiplies a 1-rank run's phases by (dlscale/analysis/model.py).

For a configuration of the study and k ranks per node, `calibrate` runs one copy of its 1-rank run
alone and k copies at once on one node (each a job of its own: no communication between them, the
same threads, data and loader as a study run), in alternating order over `trials` trials, so that
the machine's drift falls on both alike. Each trial gives the mean measured iteration of the copies
together over that of the copy alone: a rank's compute slowdown beside k - 1 others, s_k, which
shared caches, memory bandwidth and the cores loaders and interpreters use make more than 1.
"Together" means at the same time: the copies start apart by their import and compile times (up to
2 s seen), so they meet after their warm-up before measuring (the harness's `start_together`), each
measures the study's iterations (no adaptive stopping, which would end them at different counts),
and only its iterations inside the window in which every copy was measuring count (a slower copy's
last ones run alone); at least MIN_TOGETHER each, else the trial fails saying so. Until 2026-11-28
each copy's whole measured span counted though only 46-100% of it overlapped the other's (a
fresh-clone study): iterations run alone made s_k too small.
The trials' lines go to OUT (JSON lines, SCHEMA); the analysis turns them into
results/contention.csv (dlscale/analysis/contention.py).
"""

import json
import shutil
import statistics
import threading
from pathlib import Path

from dlscale.core.records import parse_file
from dlscale.core.samples import steady_start
from dlscale.core.vocabulary import STATUS, records_name
from dlscale.runtime import launch

SCHEMA = "dlscale.contention/1"
KINDS = ("alone", "together")
MIN_TOGETHER = 4  # measured iterations each copy must have inside the common window


def copies_of(config, run, count, folder, env_record):
    """Run `count` copies of the 1-rank run `run` at once, each in folder/copy<i>; returns each copy's
    mean measured iteration time (s). A copy that fails raises, naming it and why."""
    one = {**run, "nodes": 1, "ranks_per_node": 1, "repeat": 0}
    # wall time is all a copy needs (no traces to write), over a fixed count, the copies meeting first
    quiet = {**config, "profile_iterations": 0, "samples": None}
    if count > 1:
        meeting = Path(folder) / "meet"
        shutil.rmtree(meeting, ignore_errors=True)  # an earlier attempt's marks would let a copy start alone
        quiet["start_together"] = {"dir": str(meeting), "count": count}
    statuses = [None] * count

    def start(i):
        where = Path(folder) / f"copy{i}"  # its log beside it: the run folder keeps a copy of its own
        try:
            statuses[i] = launch.launch(quiet, one, env_record, where / STATUS, f"{where}.log", f"{where}.attempts")
        except Exception as exc:  # noqa: BLE001 (said in the calibration's output, never lost in a thread)
            statuses[i] = {"status": "failed", "reasons": [f"{type(exc).__name__}: {exc}"]}

    threads = [threading.Thread(target=start, args=(i,)) for i in range(count)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    for i, status in enumerate(statuses):
        if status is None or status["status"] != "ok":
            why = "; ".join(status["reasons"]) if status else "it did not start"
            raise RuntimeError(f"copy {i} of {count} failed: {why}")
    spans = [_measured(Path(folder) / f"copy{i}") for i in range(count)]
    if count == 1:
        times = [wall for _, _, wall in spans[0]]
        return [statistics.mean(times[steady_start(times) :])]
    return together(spans)


def together(spans):
    """Each copy's mean iteration over its iterations inside the window in which every copy was
    measuring; spans: per copy, (start, end, wall_s) of each measured iteration. Fewer than
    MIN_TOGETHER inside for some copy: RuntimeError, saying how many."""
    lo, hi = max(s[0][0] for s in spans), min(s[-1][1] for s in spans)
    inside = [[wall for start, end, wall in s if start >= lo and end <= hi] for s in spans]
    if min(len(i) for i in inside) < MIN_TOGETHER:
        counts = ", ".join(str(len(i)) for i in inside)
        raise RuntimeError(
            f"the copies ran together for {max(0.0, hi - lo):.2g} s: {counts} measured iterations each inside it, "
            f"{MIN_TOGETHER} needed"
        )
    return [statistics.mean(i) for i in inside]


def _measured(run_dir):
    """(start, end, wall_s) of each measured iteration of a 1-rank run (warm-up and traced ones left out)."""
    records, errors = parse_file(run_dir / records_name(0))
    if errors:
        raise RuntimeError(f"{run_dir}: {errors[0]}")
    steps = [r for r in records if r["kind"] == "step" and not r["warmup"] and not r.get("profiled")]
    return [(r["time"] - r["wall_s"], r["time"], r["wall_s"]) for r in steps]


def _count(kind, copies):
    return 1 if kind == "alone" else copies


def calibrate(config, run, copies, trials, env_record, out_path, folder):
    """`trials` trials of the 1-rank run `run` alone and `copies` copies together (alternating which
    goes first), a line per trial in out_path; a failure ends the file with a line saying why."""
    out_path, folder = Path(out_path), Path(folder)
    out_path.parent.mkdir(parents=True, exist_ok=True)
    with open(out_path, "w") as out:
        for trial in range(trials):
            order = KINDS if trial % 2 == 0 else KINDS[::-1]
            try:
                times = {
                    k: copies_of(config, run, _count(k, copies), folder / f"trial{trial}" / k, env_record)
                    for k in order
                }
            except RuntimeError as exc:
                out.write(json.dumps({"schema": SCHEMA, "trial": trial, "failure": str(exc)}) + "\n")
                return
            line = {
                "schema": SCHEMA,
                "trial": trial,
                "first": order[0],
                "copies": copies,
                "alone_s": times["alone"][0],
                "together_s": statistics.mean(times["together"]),
                "together_max_s": max(times["together"]),
            }
            out.write(json.dumps(line) + "\n")
            out.flush()
