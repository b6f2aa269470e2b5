"""Horovod's timeline files (Chrome trace JSON of B/E events, one pid per tensor), read by the
workloads (to merge into a rank's trace) and by the analysis (communication of phased runs)."""

import json
from pathlib import Path


def read_timeline(path):
    """(Unix microseconds of the timeline's zero, its events) from a Horovod timeline file, also one
    still being written (the writer keeps the file valid JSON after each event, but a file cut short
    is closed here)."""
    text = Path(path).read_text().strip()
    if not text:
        return None, []
    if not text.endswith("]"):
        text = text.rstrip(",") + "]"
    events = json.loads(text)
    zero = next(
        (
            e["args"]["start_time_since_epoch_in_micros"]
            for e in events
            if e.get("ph") == "M" and "start_time_since_epoch_in_micros" in e.get("args", {})
        ),
        None,
    )
    return zero, events


def horovod_spans(events):
    """Horovod's B/E event pairs -> [(activity, tensor, start_us, end_us)] in its own clock. Each
    tensor is a pid of its own (named by a process_name metadata event); activities nest."""
    names = {
        e["pid"]: e["args"]["name"]
        for e in events
        if e.get("ph") == "M" and e.get("name") == "process_name" and "name" in e.get("args", {})
    }
    stacks, spans = {}, []
    for e in events:
        if e.get("ph") == "B":
            stacks.setdefault(e["pid"], []).append((e.get("name", ""), e["ts"]))
        elif e.get("ph") == "E" and stacks.get(e["pid"]):
            name, start = stacks[e["pid"]].pop()
            spans.append((name, names.get(e["pid"], str(e["pid"])), start, e["ts"]))
    return spans


def fused_operations(spans, activity="ALLREDUCE"):
    """[(start, end)] of each collective operation in `spans` (horovod_spans). Horovod stamps each
    tensor of a fused operation apart (one after another, a few microseconds each), but it starts
    all of them before the operation and ends them after it, and runs one operation at a time: so
    the tensors' overlapping intervals are one operation."""
    ops = []
    for _, _, start, end in sorted((s for s in spans if s[0] == activity), key=lambda s: s[2]):
        if ops and start < ops[-1][1]:
            ops[-1] = (ops[-1][0], max(ops[-1][1], end))
        else:
            ops.append((start, end))
    return ops


def timeline_comm(path, iterations):
    """(allreduce seconds per iteration, fused allreduce operations per iteration) from a Horovod
    timeline: the union of the intervals in which any allreduce executes, and their count."""
    _, events = read_timeline(path)
    ops = fused_operations(horovod_spans(events))
    return sum(end - start for start, end in ops) / 1e6 / iterations, len(ops) / iterations
