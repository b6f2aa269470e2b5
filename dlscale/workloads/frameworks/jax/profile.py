"""JAX's profiler output (`perfetto_trace.json.gz`) as Chrome trace "X" events named by SGD phase.

XLA's CPU runtime records each operation's `hlo_module` and `hlo_op`; the compiled module's text gives its
phase (`op_name`, the JAX path that made it), and it is renamed `xla:<phase>/<hlo_op>`.
"""

import gzip
import itertools
import json
import re
from pathlib import Path

from dlscale.core.vocabulary import BACKWARD, COMM, FORWARD, UPDATE

PREFIX = "xla:"
UPDATE_SCOPE, COMM_SCOPE = UPDATE, "allreduce"  # the update scope is named after its phase


def phase_of(opcode, op_name):
    """The SGD phase of one compiled instruction from its opcode and JAX path (None for a `call`). One without
    a path is backward's (autodiff's rewrites; forward's all have one); by position instead, late weight
    gradients counted as update (AlexNet's update 0.18 s against PyTorch's 0.06 s)."""
    if opcode == "call":
        return None
    if opcode.startswith(("all-reduce", "reduce-scatter", "all-gather", "collective")) or f"/{COMM_SCOPE}/" in op_name:
        return COMM
    if not op_name:
        return BACKWARD
    if f"/{UPDATE_SCOPE}/" in op_name:
        return UPDATE
    return BACKWARD if "transpose(" in op_name else FORWARD


def _instruction(line):
    """(name, opcode) of one instruction's line of HLO text (`%name = TYPE opcode(...`), or None; TYPE
    may be a tuple with spaces inside (combined all-reduces, a max pool's backward)."""
    m = re.match(r"^\s*(?:ROOT\s+)?%?([\w.\-]+)\s*=\s*", line)
    if not m:
        return None
    rest = line[m.end() :]
    if rest.startswith("("):  # to the parenthesis that closes the tuple
        depths = itertools.accumulate({"(": 1, ")": -1}.get(ch, 0) for ch in rest)
        rest = rest[next((i for i, d in enumerate(depths) if d == 0), len(rest) - 1) + 1 :]
    else:
        rest = re.sub(r"^\S+(?:\s*\{[^}]*\})?", "", rest, count=1)
    op = re.match(r"\s+([\w\-]+)\(", rest)
    return (m.group(1), op.group(1)) if op else None


def instruction_phases(hlo_text):
    """{instruction name: phase} of one compiled module's text (`Compiled.as_text()`)."""
    out = {}
    for line in hlo_text.splitlines():
        found = _instruction(line)
        if not found:
            continue
        op_name = re.search(r'op_name="([^"]*)"', line)
        out[found[0]] = phase_of(found[1], op_name.group(1) if op_name else "")
    return out


def module_name(hlo_text):
    first = hlo_text.split("\n", 1)[0]
    return first.split()[1].rstrip(",") if first.startswith("HloModule") else ""


def events(folder, modules):
    """The profile under `folder` as Chrome "X" events; `modules`: {module name: compiled text} run."""
    files = sorted(Path(folder).glob("plugins/profile/*/perfetto_trace.json.gz"))
    if not files:
        raise FileNotFoundError(f"JAX's profiler wrote no perfetto_trace.json.gz under {folder}")
    phases = {name: instruction_phases(text) for name, text in modules.items()}
    out = []
    for e in json.loads(gzip.open(files[-1]).read())["traceEvents"]:
        if e.get("ph") != "X":
            continue
        args = e.get("args") or {}
        name = args.get("long_name", e["name"])  # an annotation's full name (the trace shortens it)
        phase = phases.get(args.get("hlo_module"), {}).get(args.get("hlo_op"))  # None: not an operation of ours
        if phase:
            name = f"{PREFIX}{phase}/{args['hlo_op']}"
        out.append({"name": name, "ph": "X", "ts": e["ts"], "dur": e.get("dur", 0), "tid": e.get("tid"), "cat": "host"})
    return out
