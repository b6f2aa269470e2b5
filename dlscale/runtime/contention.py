"""What sharing a node costs a rank's compute, measured: the calibration the performance model
multiplies a 1-rank run's phases by (dlscale/analysis/model.py).

For a configuration of the study and k ranks per node, `calibrate` runs one copy of its 1-rank run
alone and k copies at once on one node (each a job of its own: no communication between them, the
same threads, data and loader as a study run), in alternating order over `trials` trials, so that
the machine's drift falls on both alike. Each trial gives the mean measured iteration of the copies
together over that of the copy alone: a rank's compute slowdown beside k - 1 others, s_k, which
shared caches, memory bandwidth and the cores loaders and interpreters use make more than 1.
"Together" means at the same time: the copies start apart by their import and compile times (up to
2 s seen) and end apart by their speeds, so they meet after their warm-up, each measures the study's
iterations (a fixed count), and a copy done first keeps stepping, unrecorded, until all are done
(dlscale/workloads/together.py): every measured iteration ran beside the other copies. Until
2026-11-28 they did neither, and only 46-100% of a copy's measured span overlapped the other's (a
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
    return [_mean_iteration(Path(folder) / f"copy{i}") for i in range(count)]


def _mean_iteration(run_dir):
    """Mean wall time of a 1-rank run's measured iterations, as the study's own runs are measured (warm-up,
    traced and not yet steady iterations left out: dlscale/core/samples.py)."""
    times = [wall for _, _, wall in _measured(run_dir)]
    return statistics.mean(times[steady_start(times) :])


def _measured(run_dir):
    """(start, end, wall_s) of each measured iteration of a 1-rank run (warm-up and traced ones left out)."""
    records, errors = parse_file(run_dir / records_name(0))
    if errors:
        raise RuntimeError(f"{run_dir}: {errors[0]}")
    steps = [r for r in records if r["kind"] == "step" and not r["warmup"] and not r.get("profiled")]
    return [(r["time"] - r["wall_s"], r["time"], r["wall_s"]) for r in steps]


def _count(kind, copies):
    return 1 if kind == "alone" else copies


def calibrate(config, run, env_record, out_path, folder):
    """The config's `contention.trials` trials of the 1-rank run `run` alone and as many copies
    together as the run has ranks per node (alternating which goes first), a line per trial in
    out_path; a failure ends the file with a line saying why."""
    copies, trials = run["ranks_per_node"], config["contention"]["trials"]
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
