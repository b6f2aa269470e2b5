"""Benchmark (not a test): the allreduce sweep's Horovod paths through each framework's binding.

A study hands Horovod the sweep's and the replays' tensors through the binding of one framework it
runs through Horovod (PyTorch's where it runs PyTorch; dlscale/runtime/config.py `instrument`).
Horovod's core is the same under every binding; this measures what the hand-over adds: for each
trial, a 2-rank sweep (`python -m dlscale.runtime.allreduce --instrument F`, one node, in F's own
environment) of each binding, the bindings' order rotated from trial to trial, and per binding,
path (`horovod`: 4 tensors per message; `horovod_tensors`: 128) and size the median over trials of
each sweep's median time, its min and max over trials, and its ratio to PyTorch's.

  .venv/bin/python bench/instruments.py [--trials 5] [--max-bytes 4194304] [--out bench/results/instruments.csv]
"""

import argparse
import json
import statistics
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from overhead import framework_python, machine, write_table  # noqa: E402

from dlscale.core import paths  # noqa: E402
from dlscale.runtime import execution, launchers  # noqa: E402
from dlscale.workloads import frameworks  # noqa: E402

HOROVOD_PATHS = ("horovod", "horovod_tensors")


def sweep(framework, max_bytes, folder):
    """{(path, bytes): median s} of one 2-rank sweep through `framework`'s binding, in its Python."""
    python = framework_python(framework)
    out = Path(folder) / f"{framework}.jsonl"
    module = [python, "-m", "dlscale.runtime.allreduce", str(out), "--max-bytes", str(max_bytes)]
    argv = launchers.local_argv(2, [*module, "--instrument", framework], {"PYTHONPATH": str(paths.SOURCE)})
    rc, timed_out = execution.execute(argv, Path(folder) / f"{framework}.log", timeout_s=900)
    if rc or timed_out:
        raise SystemExit(f"{framework}'s sweep failed: {(Path(folder) / f'{framework}.log').read_text()[-2000:]}")
    rows = [json.loads(line) for line in out.read_text().splitlines()]
    return {(r["path"], r["bytes"]): r["median_s"] for r in rows if r["path"] in HOROVOD_PATHS}


def table(medians):
    """Rows from {framework: [{(path, bytes): median s} per trial]}."""
    rows = []
    for fw, trials in medians.items():
        for key in trials[0]:
            times = [t[key] for t in trials]
            ref = statistics.median(t[key] for t in medians[frameworks.REFERENCE])
            rows.append(
                {
                    "binding": fw,
                    "path": key[0],
                    "bytes": key[1],
                    "median_s": statistics.median(times),
                    "min_s": min(times),
                    "max_s": max(times),
                    "trials": len(times),
                    "ratio_to_torch": round(statistics.median(times) / ref, 3),
                    "machine": machine(),
                }
            )
    return rows


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--trials", type=int, default=5)
    ap.add_argument("--max-bytes", type=int, default=4 << 20)
    ap.add_argument("--out", default=str(ROOT / "bench" / "results" / "instruments.csv"))
    args = ap.parse_args()
    bindings = frameworks.with_part("instrument")
    medians = {fw: [] for fw in bindings}
    with tempfile.TemporaryDirectory() as folder:
        for trial in range(args.trials):
            order = bindings[trial % len(bindings) :] + bindings[: trial % len(bindings)]
            for fw in order:
                medians[fw].append(sweep(fw, args.max_bytes, folder))
                print(f"trial {trial + 1}: {fw} done", flush=True)
    rows = table(medians)
    for r in rows:
        ms = r["median_s"] * 1e3
        print(f"{r['binding']:<11} {r['path']:<16} {r['bytes']:>8} B {ms:8.3f} ms x{r['ratio_to_torch']}")
    write_table(rows, args.out)


if __name__ == "__main__":
    main()
