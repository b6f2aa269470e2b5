"""One Chrome trace per rank ("X" events, Unix microseconds) from three clocks: the loop's (time.time and
perf_counter read together: `Clock`), the profiler's (its ITERATION annotations' median offset), Horovod's."""

import statistics
import time
from dataclasses import dataclass
from pathlib import Path

from dlscale.core.timeline import horovod_spans, read_timeline

ITERATION = "dlscale:iteration"
HOROVOD_TID = "horovod"


@dataclass
class Clock:
    unix_s: float
    perf_s: float

    @classmethod
    def now(cls):
        perf = time.perf_counter()
        unix = time.time()
        return cls(unix, (perf + time.perf_counter()) / 2)

    def us(self, perf_s):
        """perf_counter seconds -> Unix microseconds."""
        return (self.unix_s + perf_s - self.perf_s) * 1e6


def framework_offset(events, spans, clock):
    """Microseconds to add to the framework's timestamps to get Unix microseconds."""
    starts = {}
    for e in events:
        if e["name"].startswith(ITERATION):
            it = int(e["name"][len(ITERATION) :])
            starts.setdefault(it, e["ts"])
    pairs = [clock.us(spans[it][0]) - ts for it, ts in starts.items() if it in spans]
    if not pairs:
        raise ValueError(
            "the framework's trace holds none of the loop's iteration annotations; its clock cannot be aligned"
        )
    return statistics.median(pairs)


def merge(framework, rank, clock, spans, events, timeline_path):
    """The rank's Chrome trace as a dict (see the module's docstring)."""
    offset = framework_offset(events, spans, clock)
    # Horovod writes the file's header with its first event: an empty file is a timeline of no collective (1 rank)
    recorded = Path(timeline_path).exists()
    hvd = _horovod_events(rank, timeline_path) if recorded else []
    out = _loop_events(rank, clock, spans) + _framework_events(rank, events, offset) + hvd
    meta = {"framework": framework, "rank": rank, "clock": "Unix microseconds", "framework_offset_us": offset}
    horovod = {"horovod_timeline": str(timeline_path) if recorded else None, "horovod_events": len(hvd)}
    return {"traceEvents": sorted(out, key=lambda e: e["ts"]), "displayTimeUnit": "ms", "otherData": meta | horovod}


def _loop_events(rank, clock, spans):
    """The loop's own iterations, on the Unix clock."""
    same = {"name": "iteration", "cat": "dlscale", "ph": "X", "pid": rank, "tid": "loop"}
    return [
        {**same, "ts": clock.us(start), "dur": (end - start) * 1e6, "args": {"iteration": it}}
        for it, (start, end, _loss) in sorted(spans.items())
    ]


def _framework_events(rank, events, offset):
    """The profiler's events (less iteration annotations) on the Unix clock, category as `source_cat`."""
    return [
        {
            **e,
            "cat": "framework",
            "pid": rank,
            "ts": e["ts"] + offset,
            "args": {**e.get("args", {}), "source_cat": e.get("cat", "")},
        }
        for e in events
        if not e["name"].startswith(ITERATION)
    ]


def _horovod_events(rank, timeline_path):
    """The rank's Horovod timeline spans, on the Unix clock through the timeline's stated start."""
    zero, hvd_events = read_timeline(timeline_path)
    same = {"cat": "horovod", "ph": "X", "pid": rank, "tid": HOROVOD_TID}
    return [
        {"name": activity, **same, "ts": zero + start, "dur": end - start, "args": {"tensor": tensor}}
        for activity, tensor, start, end in horovod_spans(hvd_events)
    ]
