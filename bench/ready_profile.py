"""Benchmark record (not a test): how well the model's borrowed ready times stand for TensorFlow's and
MXNet's own (dlscale/analysis/prediction.py `_borrow_ready`).

Neither framework reports when each gradient is complete, so the model gives them PyTorch's ready
times of the same network as fractions of backward. Their multi-rank runs' traces show when each
gradient's allreduce was handed to Horovod: the start of its NEGOTIATE_ALLREDUCE on rank 0 (within
one Horovod cycle of the first rank's hand-over). Per traced iteration of each 2-rank run, that start
as a fraction of the iteration's backward (first backward operation to last, as the trace phases
classify them), median over iterations, against the fraction the model borrowed for that gradient.
One row per framework and network: the median |difference| over gradients, and weighted by their
bytes (what the schedule's busy time follows). Appends to bench/results/ready-profile.csv.

  .venv/bin/python bench/ready_profile.py RESULTS [--note TEXT]
"""

import argparse
import datetime
import json
import sys
from pathlib import Path

import numpy as np
import pandas as pd

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from bench.overhead import machine, merge_table, write_table  # noqa: E402
from bench.study_time import commit  # noqa: E402
from dlscale.analysis import trace  # noqa: E402
from dlscale.core import paths  # noqa: E402
from dlscale.core.vocabulary import BACKWARD  # noqa: E402

BORROWERS = ("tensorflow", "mxnet")
KEY = ("framework", "network", "results")


def handed_over(framework, events):
    """Per traced iteration, {gradient index: its negotiation start as a fraction of backward}."""
    starts = sorted(e["ts"] for e in events if e.get("name") == "dlscale:io")
    out = []
    for lo, hi in zip(starts, starts[1:] + [float("inf")]):
        mine = [e for e in events if e.get("ph") == "X" and lo <= e.get("ts", 0) < hi]
        backward = [e for e in mine if trace.classify(framework, e) == BACKWARD]
        if not backward:
            continue
        b0, b1 = min(e["ts"] for e in backward), max(e["ts"] + e["dur"] for e in backward)
        names = {e["args"]["tensor"]: e["ts"] for e in mine if e.get("name") == "NEGOTIATE_ALLREDUCE"}
        out.append({int(n.rsplit("grad", 1)[-1].rsplit(".", 1)[-1]): (t - b0) / (b1 - b0) for n, t in names.items()})
    return out


def borrowed(tensors, framework, model):
    """The fractions of backward the model gives `framework`'s gradients: PyTorch's, the k-th of a size
    taking the k-th of that size; and their sizes."""
    one = tensors[(tensors["model"] == model) & (tensors["ranks_per_node"] == 1) & (tensors["nodes"] == 1)]
    torch = one[one["framework"] == "torch"].groupby("tensor")[["bytes", "ready_s"]].median()
    mine = one[(one["framework"] == framework) & (one["repeat"] == one["repeat"].min())].sort_values("tensor")
    fractions = {}
    for size, ready in zip(torch["bytes"].astype(int), torch["ready_s"] / torch["ready_s"].max()):
        fractions.setdefault(size, []).append(ready)
    taken = {size: iter(f) for size, f in fractions.items()}
    sizes = mine["bytes"].astype(int).tolist()
    return [next(taken[s]) for s in sizes], sizes


def rows(results, note):
    results = Path(results)
    tensors = pd.read_csv(results / paths.TABLES["tensors"])
    out = []
    for framework in BORROWERS:
        for model in sorted(set(tensors.loc[tensors["framework"] == framework, "model"])):
            pattern = f"{framework}/{model}/overlap/horovod/*/native/nodes1_rpn2*/repeat*/trace_rank0.json"
            seen = [f for p in sorted((results / "runs").glob(pattern)) for f in handed_over(framework, _events(p))]
            if not seen or "torch" not in set(tensors["framework"]):
                continue
            model_gives, sizes = borrowed(tensors, framework, model)
            measured = pd.DataFrame(seen).median()
            diff = np.array([abs(measured.get(i, np.nan) - f) for i, f in enumerate(model_gives)])
            weights = np.array(sizes) / sum(sizes)
            out.append(
                {
                    "framework": framework,
                    "network": model,
                    "gradients": len(sizes),
                    "iterations": len(seen),
                    "median_abs_difference": round(float(np.nanmedian(diff)), 3),
                    "bytes_weighted_abs_difference": round(float(np.nansum(diff * weights)), 3),
                    "largest_gradient_measured": round(float(measured.get(int(np.argmax(sizes)), np.nan)), 3),
                    "largest_gradient_borrowed": round(model_gives[int(np.argmax(sizes))], 3),
                    "results": f"{results.resolve().parent.name}/{results.name}",
                    "note": note,
                    "machine": machine(),
                    "date": datetime.date.today().isoformat(),
                    "commit": commit(results),
                    "command": f".venv/bin/python bench/ready_profile.py {results.name}",
                }
            )
    return out


def _events(path):
    return json.loads(path.read_text())["traceEvents"]


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("results", help="a finished study's results folder (PyTorch and TensorFlow or MXNet, 2 ranks)")
    ap.add_argument("--note", default="", help="what else was true of the machine while the study ran")
    ap.add_argument("--out", default=str(ROOT / "bench" / "results" / "ready-profile.csv"))
    args = ap.parse_args(argv)
    found = rows(args.results, args.note)
    if not found:
        print("no 2-rank traced run of TensorFlow or MXNet beside PyTorch's 1-rank ready times", file=sys.stderr)
        return 1
    for r in found:
        print(r)
    write_table(merge_table(found, args.out, KEY) if Path(args.out).is_file() else found, args.out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
