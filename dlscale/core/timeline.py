"""Horovod's timeline files (Chrome trace JSON of B/E events, one pid per tensor)."""

import json
from pathlib import Path


def read_timeline(path):
    """(Unix microseconds of its zero, its events) of a Horovod timeline, also one cut short."""
    text = Path(path).read_text().strip()
    if not text:
        return None, []
    if not text.endswith("]"):
        text = text.rstrip(",") + "]"
    events = json.loads(text)
    key = "start_time_since_epoch_in_micros"
    metadata = [e.get("args", {}) for e in events if e.get("ph") == "M"]
    return next((args[key] for args in metadata if key in args), None), events


def horovod_spans(events):
    """Horovod's B/E pairs -> [(activity, tensor, start_us, end_us)]: a pid per tensor; activities nest."""
    named = [e for e in events if e.get("ph") == "M" and e.get("name") == "process_name"]
    names = {e["pid"]: e["args"]["name"] for e in named if "name" in e.get("args", {})}
    stacks, spans = {}, []
    for e in events:
        if e.get("ph") == "B":
            stacks.setdefault(e["pid"], []).append((e.get("name", ""), e["ts"]))
        elif e.get("ph") == "E" and stacks.get(e["pid"]):
            name, start = stacks[e["pid"]].pop()
            spans.append((name, names.get(e["pid"], str(e["pid"])), start, e["ts"]))
    return spans


def fused_operations(spans, activity="ALLREDUCE"):
    """[(start, end)] of each collective in `spans`: a fused one's tensors overlap, all around it."""
    ops = []
    for _, _, start, end in sorted((s for s in spans if s[0] == activity), key=lambda s: s[2]):
        if ops and start < ops[-1][1]:
            ops[-1] = (ops[-1][0], max(ops[-1][1], end))
        else:
            ops.append((start, end))
    return ops


def timeline_comm(path, iterations):
    """(allreduce seconds, fused allreduce operations) per iteration of a Horovod timeline."""
    _, events = read_timeline(path)
    ops = fused_operations(horovod_spans(events))
    return sum(end - start for start, end in ops) / 1e6 / iterations, len(ops) / iterations
