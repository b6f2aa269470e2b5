"""Whether a finished run ran right, from the files it left: every rank's records (and traces),
and the first error a rank printed."""

import math
import re
from pathlib import Path

from dlscale.core.records import parse_file
from dlscale.core.vocabulary import records_name, trace_name

CHECKSUM_RTOL = 1e-6


def check_run(run_dir, size, traced=False):
    """(problems, parse errors) of a finished run's records (and, when `traced`, its trace files)."""
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
        bad = [s["iteration"] for s in steps if not isinstance(s["loss"], (int, float)) or not math.isfinite(s["loss"])]
        if bad:
            problems.append(f"rank {rank}: loss not finite at iterations {bad[:5]}")
        checksums[rank] = ends[0]["checksum"]
    if checksums:
        ref = checksums[min(checksums)]
        off = [r for r, c in checksums.items() if not math.isclose(c, ref, rel_tol=CHECKSUM_RTOL, abs_tol=1e-9)]
        if off:
            which = f"ranks {off} vs rank {min(checksums)}"
            problems.append(f"weights differ across ranks after training ({which}): gradients were not averaged")
    if errors:
        problems.append(f"{len(errors)} malformed record line(s), first: {errors[0]}")
    return problems, errors


# A Python exception line: `ValueError: ...`, `horovod.common.exceptions.HorovodInternalError: ...`.
ERROR_LINE = re.compile(r"^(?:[\w.]+\.)?\w*(?:Error|Exception|Exit)\b(?::.*)?$")
# What the launcher, ssh or a shell print when a job cannot start, before any rank runs Python, e.g.
#   ssh: connect to host node01 port 22: Connection refused
#   root@node01: Permission denied (publickey,password).
#   srun: error: Unable to allocate resources: Invalid partition name specified
#   bash: line 1: orted: command not found
# A program's own name, then its message: TensorFlow's "Could not load dynamic library" warnings start with
# a date, not a name, and are not taken.
LAUNCHER_LINE = re.compile(
    r"^(?:ssh: .*|[\w.-]+: [Ee]rror: .*|Host key verification failed\.|"
    r"[\w.@/-]+: .*(?:command not found|: not found|No such file or directory|"
    r"Permission denied\b.*|Connection refused))$"
)
# Open MPI's own messages come in a box between lines of dashes; its first sentence says what went wrong.
BOX_RULE = re.compile(r"^-{20,}$")
# Boxes that say no cause: warnings (the job goes on), and the ones that only restate that a rank
# exited non-zero (the rank's own error, if it printed one, came before them).
NOT_A_CAUSE = ("WARNING", "Primary job terminated normally")
NOT_A_CAUSE += ("mpirun detected that one or more processes exited with non-zero status",)
# `mpirun --tag-output` and `srun --label` put the rank before each of its lines.
RANK_TAG = re.compile(r"^(?:\[\d+,\d+\]<std(?:out|err)>:|\d+: )")


def _box_sentence(lines):
    """An Open MPI box's first sentence, on one line, with the executable it names (the news), if any."""
    paragraph = []
    for line in lines:
        if not line.strip():
            if paragraph:
                break
            continue
        paragraph.append(line.strip())
    text = " ".join(" ".join(paragraph).split())
    sentence = re.split(r"(?<=[.:])\s", text + " ", maxsplit=1)[0].rstrip(".:")
    named = [line.split(":", 1)[1].strip() for line in lines if line.startswith("Executable:")]
    return f"{sentence} (executable: {named[0]})" if named else sentence


def first_error(log_text):
    """The first line in a job's log that says what went wrong, or None: a Python exception, a launcher's
    or shell's error, or the first sentence of Open MPI's first error box. What follows it (boxes about
    the job's end, other ranks' exceptions) is its consequence."""
    lines = [RANK_TAG.sub("", line).strip() for line in log_text.splitlines()]
    i = 0
    while i < len(lines):
        line = lines[i]
        if ERROR_LINE.match(line) or LAUNCHER_LINE.match(line):
            return line
        if BOX_RULE.match(line):
            end = next((j for j in range(i + 1, len(lines)) if BOX_RULE.match(lines[j])), len(lines))
            sentence = _box_sentence(lines[i + 1 : end])
            if sentence and not sentence.startswith(NOT_A_CAUSE):
                return sentence
            i = end
        i += 1
    return None
