"""Whether a finished run ran right, from the files it left: every rank's records (and traces),
and the first error a rank printed."""

import math
import re
from pathlib import Path

from harness.records import parse_file
from harness.vocabulary import records_name, trace_name

CHECKSUM_RTOL = 1e-6


def check_run(run_dir, size, traced=False):
    """Correctness of a finished run from its records (and, when `traced`, every rank's trace file).
    Returns (problems, parse errors)."""
    problems, errors, checksums = [], [], {}
    if traced:
        missing = [r for r in range(size) if not (Path(run_dir) / trace_name(r)).is_file()]
        if missing:
            problems.append(f"rank(s) {missing} wrote no trace of the profiled iterations")
    for rank in range(size):
        path = Path(run_dir) / records_name(rank)
        if not path.is_file():
            problems.append(f"rank {rank} wrote no records")
            continue
        records, errs = parse_file(path)
        errors += errs
        steps = [r for r in records if r["kind"] == "step"]
        ends = [r for r in records if r["kind"] == "end"]
        if not any(r["kind"] == "run" for r in records):
            problems.append(f"rank {rank} has no run record")
        if not ends:
            problems.append(f"rank {rank} did not finish (no end record after {len(steps)} steps)")
            continue
        if len(steps) != ends[0]["iterations"]:
            problems.append(f"rank {rank} recorded {len(steps)} steps of {ends[0]['iterations']}")
        bad = [s["iteration"] for s in steps if not isinstance(s["loss"], (int, float))
               or not math.isfinite(s["loss"])]
        if bad:
            problems.append(f"rank {rank}: loss not finite at iterations {bad[:5]}")
        checksums[rank] = ends[0]["checksum"]
    if checksums:
        ref = checksums[min(checksums)]
        off = [r for r, c in checksums.items() if not math.isclose(c, ref, rel_tol=CHECKSUM_RTOL, abs_tol=1e-9)]
        if off:
            problems.append(f"weights differ across ranks after training (ranks {off} vs rank "
                            f"{min(checksums)}): gradients were not averaged")
    if errors:
        problems.append(f"{len(errors)} malformed record line(s), first: {errors[0]}")
    return problems, errors


ERROR_LINE = re.compile(r"^(?:[\w.]+\.)?\w*(?:Error|Exception|Exit)\b(?::.*)?$")


def first_error(log_text):
    """The first Python exception line a rank printed (the root cause, not the echoes), or None."""
    for line in log_text.splitlines():
        line = line.strip()
        if ERROR_LINE.match(line):
            return line
    return None
