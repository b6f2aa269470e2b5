"""Per-rank records, one JSON line each: one ``run``, one ``step`` per iteration, one ``end`` if the rank
finished. A malformed line is an error naming the file and line; nothing is dropped silently."""

import datetime
import json
import math
import time

from dlscale.core.vocabulary import PHASE_SECONDS, RUN_KEYS, renamed

SCHEMA = "dlscale.record/4"  # 4: comm, comm_library renamed allreduce_schedule, allreduce_library (0.3.0)
OLDER = "dlscale.record/3"  # read as SCHEMA with its keys renamed (`upgrade`): its runs can be analysed again
PHASE_KEYS = PHASE_SECONDS
IDENTITY = tuple(RUN_KEYS)
REQUIRED = {
    "run": IDENTITY + ("rank", "size", "local_rank", "host", "provenance"),
    "step": ("rank", "iteration", "warmup", "profiled", "wall_s", "loss"),
    "end": ("rank", "iterations", "checksum", "elapsed_s"),
}


def utc_stamp(epoch):
    """A time (seconds since the epoch) as a run's status.json writes it: UTC, ISO 8601, ms, a Z."""
    seconds, ms = divmod(round(epoch * 1000), 1000)  # rounded once: 1.9999996 is 2.000, not 1.000
    return time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(seconds)) + f".{ms:03d}Z"


def utc_epoch(stamp):
    """`utc_stamp`'s text back in seconds since the epoch."""
    return datetime.datetime.fromisoformat(stamp.removesuffix("Z")).replace(tzinfo=datetime.timezone.utc).timestamp()


class Writer:
    """Appends records to one rank's file, one flushed line each, so a crash loses nothing written."""

    def __init__(self, path):
        self._fh = open(path, "w")

    def write(self, kind, **fields):
        fields = {"schema": SCHEMA, "kind": kind, "time": time.time(), **fields}
        self._fh.write(json.dumps(fields) + "\n")
        self._fh.flush()

    def close(self):
        self._fh.close()


def upgrade(rec):
    """A decoded record of the schema before (OLDER) in today's words; any other value unchanged."""
    if isinstance(rec, dict) and rec.get("schema") == OLDER:
        return renamed(rec) | {"schema": SCHEMA}
    return rec


def validate(rec):
    """Return the problem with one decoded record, or None."""
    if not isinstance(rec, dict):
        return "not a JSON object"
    if rec.get("schema") != SCHEMA:
        return f"schema is {rec.get('schema')!r}, expected {SCHEMA!r}"
    kind = rec.get("kind")
    if kind not in REQUIRED:
        return f"unknown kind {kind!r} (known: {', '.join(REQUIRED)})"
    missing = [k for k in REQUIRED[kind] if k not in rec]
    if missing:
        return f"{kind} record lacks {', '.join(missing)}"
    if kind == "step":
        present = [k for k in PHASE_KEYS if k in rec]
        lacking = [k for k in PHASE_KEYS if k not in rec]
        if present and lacking:
            return f"step record has {', '.join(present)} but lacks {', '.join(lacking)}"
        for key in present + ["wall_s"]:
            value = rec[key]
            if not isinstance(value, (int, float)) or not math.isfinite(value) or value < 0:
                return f"{key} is {value!r}, expected a finite non-negative number of seconds"
    return None


def parse_lines(lines, source="<records>"):
    """Parse JSON lines. Returns (records, errors); each error is 'source:line: problem'."""
    records, errors = [], []
    for number, line in enumerate(lines, start=1):
        if not line.strip():
            continue
        try:
            rec = upgrade(json.loads(line))
        except json.JSONDecodeError as exc:
            errors.append(f"{source}:{number}: not valid JSON ({exc.msg})")
            continue
        problem = validate(rec)
        if problem:
            errors.append(f"{source}:{number}: {problem}")
        else:
            records.append(rec)
    return records, errors


def parse_file(path):
    with open(path, errors="replace") as fh:  # bytes that are not UTF-8 become malformed lines, named
        return parse_lines(fh, source=str(path))
