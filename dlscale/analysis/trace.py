"""Phases of a native run's iterations from each rank's merged Chrome trace: each instant goes to the
highest-priority compute class active, else to comm while an allreduce is in flight, else to the phase before."""

import json
import math
from pathlib import Path

from dlscale.core.vocabulary import BACKWARD, COMM, COMM_TOTAL, FORWARD, H2D, IO, PHASES, UPDATE, seconds
from dlscale.workloads import frameworks

COMPUTE_PRIORITY = (IO, H2D, UPDATE, BACKWARD, FORWARD)
EXTRA = (COMM_TOTAL, "overlap")
DEVICE_CATS = ("cuda",)  # the profiler's device activity (PyTorch on the GPU)


def classify(framework, event):
    """A merged-trace event's class: a phase, compute (placed by position), comm, wait, or None (not counted)."""
    name, cat = event.get("name", ""), event.get("cat")
    if cat == "horovod":
        if name == "ALLREDUCE":
            return COMM
        return "wait" if name.startswith("NEGOTIATE") else None
    if cat != "framework":
        return None
    if name.startswith("dlscale:"):
        return {"dlscale:io": IO, "dlscale:h2d": H2D}.get(name)
    declared = frameworks.get(framework)
    for test, text, cls in declared.TRACE_RULES:
        if name.startswith(text) if test == "prefix" else text in name:
            return None if cls == "ignore" else cls
    return declared.trace_rest(event)


def _union(intervals):
    total, end = 0.0, -math.inf
    for a, b in sorted(intervals):
        if b > end:
            total += b - max(a, end)
            end = b
    return total


def on_device(event):
    """A GPU activity (kernel, copy, memset) of the framework's profiler, not a host event."""
    return event.get("cat") == "framework" and event.get("args", {}).get("source_cat") in DEVICE_CATS


def derive(framework, events):
    """{(rank, iteration): {phase_s..., comm_total_s, overlap_s, overlap_ratio, wall_s}} of a rank's events (us)."""
    iterations = [e for e in events if e.get("cat") == "dlscale" and e.get("name") == "iteration"]
    device = [e for e in events if on_device(e)]
    host = [e for e in events if not on_device(e)]
    classified = []
    for e in host:
        cls = classify(framework, e)
        if cls and not (device and cls in (FORWARD, BACKWARD, UPDATE, "compute")):
            classified.append((e["ts"], e["ts"] + e.get("dur", 0), cls))
    out = {}
    for it in iterations:
        t0, t1 = it["ts"], it["ts"] + it["dur"]
        intervals = classified + (device_classes(framework, host, device, t0, t1) if device else [])
        inside = [(max(a, t0), min(b, t1), c) for a, b, c in intervals if b > t0 and a < t1 and min(b, t1) > max(a, t0)]
        out[(it["pid"], it["args"]["iteration"])] = phases_of(inside, t0, t1)
    return out


def device_classes(framework, host, device, t0, t1):
    """Each device activity of the iteration [t0, t1] with the class of the host operation that launched it."""
    launched_by = {e["args"]["correlation"]: e for e in host if "correlation" in e.get("args", {})}
    backward = [e for e in host if t0 <= e["ts"] < t1 and classify(framework, e) == BACKWARD]
    first_bwd = min((e["ts"] for e in backward), default=math.inf)
    last_bwd = max((e["ts"] + e.get("dur", 0) for e in backward), default=math.inf)
    out = []
    for e in device:
        if not t0 <= e["ts"] < t1 or e["name"].startswith("dlscale:"):  # the annotations' device-side copies
            continue
        if e["name"].startswith("Memcpy HtoD"):
            cls = H2D
        else:
            op = launched_by.get(e["args"].get("linked"))
            cls = classify(framework, op) if op else "compute"
            if op and cls in (None, "compute", IO, H2D):
                cls = _by_position(op["ts"], first_bwd, last_bwd)
        out.append((e["ts"], e["ts"] + e.get("dur", 0), cls))
    return out


def _by_position(t, first_bwd, last_bwd):
    return FORWARD if t < first_bwd else (UPDATE if t >= last_bwd else BACKWARD)


def phases_of(intervals, t0, t1):
    """Phase seconds of one iteration [t0, t1] (microseconds) from classified intervals."""
    backward = [(a, b) for a, b, c in intervals if c == BACKWARD]
    first_bwd = min((a for a, _ in backward), default=math.inf)
    last_bwd = max((b for _, b in backward), default=math.inf)
    resolved = [(a, b, _by_position(a, first_bwd, last_bwd) if c == "compute" else c) for a, b, c in intervals]
    edges = sorted([(a, 1, c) for a, b, c in resolved if b > a] + [(b, -1, c) for a, b, c in resolved if b > a])
    edges.append((t1, 0, None))
    counts = dict.fromkeys(COMPUTE_PRIORITY + (COMM, "wait"), 0)
    totals = dict.fromkeys(PHASES, 0.0)
    overlap, pending, previous, now = 0.0, 0.0, None, t0
    for t, delta, cls in edges:
        if t > now:  # the segment [now, t] under the current counts
            compute = next((c for c in COMPUTE_PRIORITY if counts[c]), None)
            if compute and counts[COMM]:
                overlap += t - now
            phase = compute or (COMM if counts[COMM] or counts["wait"] else previous)
            if phase is None or (not compute and phase in (IO, H2D)):
                # before the first operation, or after staging: dispatch of what comes next, given to it
                pending += t - now
            else:
                totals[phase] += t - now + pending
                pending, previous = 0.0, phase
            now = t
        if cls:
            counts[cls] += delta
    if pending:
        totals[previous or IO] += pending
    comm_total = _union([(a, b) for a, b, c in resolved if c == COMM])
    row = {seconds(p): v / 1e6 for p, v in totals.items()}
    row.update(comm_total_s=comm_total / 1e6, overlap_s=overlap / 1e6, wall_s=(t1 - t0) / 1e6)
    row["overlap_ratio"] = overlap / comm_total if comm_total > 0 else math.nan  # not clamped: both measured
    return row


def read(path):
    """(framework, events) of a merged trace file; a file that is not a trace is a ValueError."""
    try:
        doc = json.loads(Path(path).read_text())
        return doc["otherData"]["framework"], doc["traceEvents"]
    except (OSError, ValueError, KeyError, TypeError) as exc:
        raise ValueError(f"{path}: not a dlscale trace ({exc})") from exc
