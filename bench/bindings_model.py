"""Benchmark record (not a test): does the model predict a framework's Horovod runs better from its
own binding's allreduce sweep (`allreduce_bindings: each`) than from the instrument's (PyTorch's)?
(bench/results/bindings-model.csv).

In a finished study's folder (a checkout with its results), sweeps the allreduce `--sweeps` times
again with `allreduce_bindings: each` (the study's own allreduce rule, through Snakemake, nothing
else re-run), and for each sweep predicts the study's own runs twice from it: every framework from
the instrument's paths (the sweep without its `horovod:<framework>` paths) and each from its own
binding's. Writes per sweep and multi-rank configuration the median error of the iteration and of
the communication time over the configuration's runs, each way, and each way's per-tensor cost; and
per sweep the median |error| over all runs. The study's own sweep is put back afterwards (its
tables and model made again from it), so its results are as they were.

  .venv/bin/python bench/bindings_model.py STUDY [--sweeps 3] [--note TEXT]
      [--out bench/results/bindings-model.csv]
"""

import argparse
import datetime
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import pandas as pd

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from bench.overhead import machine  # noqa: E402
from bench.study_time import commit  # noqa: E402
from dlscale.analysis import contention, prediction, steps  # noqa: E402
from dlscale.core import paths  # noqa: E402
from dlscale.workloads.frameworks import HOROVOD, binding_path  # noqa: E402

GROUP = ["framework", "model", "ranks"]
WAYS = ("instrument", "own")
COLUMNS = ["date", "commit", "sweep", *GROUP, "runs"]
COLUMNS += [f"{m}_{w}" for m in ("error_iteration", "error_comm_total", "per_tensor_us") for w in WAYS]
COLUMNS += ["note", "machine"]


def snakemake(study, *args):
    """The study's own pipeline, re-running only what `args` force (input times decide the rest)."""
    command = [sys.executable, "-m", "snakemake", "--cores", "all", "--rerun-triggers", "mtime", *args]
    done = subprocess.run(command, cwd=study, capture_output=True, text=True)
    if done.returncode:
        raise SystemExit(f"{' '.join(command)} failed in {study}:\n{done.stderr[-3000:]}")


def inputs(results):
    """The model's inputs of a study but its sweep: (runs, status, tensors, slowdowns)."""
    status = pd.read_csv(results / paths.TABLES["runs"], keep_default_na=False, na_values=[""])
    calibrated = pd.read_csv(results / paths.TABLES["contention"], keep_default_na=False, na_values=[""])
    runs = steps._run_metrics(results / paths.TABLES["run_metrics"])
    return runs, status, pd.read_csv(results / paths.TABLES["tensors"]), contention.slowdowns(calibrated)


def model_both_ways(study_inputs, sweep, fits):
    """{way: the model's multi-rank rows} from one sweep: the instrument's paths only, and each own."""
    runs, status, tensors, slowdowns = study_inputs
    out = {}
    for way in WAYS:
        keep = (lambda p: p == p) if way == "own" else (lambda p: ~p.fillna("").str.startswith(binding_path("")))
        table, _, _ = prediction.model_table(
            runs, status, tensors, sweep[keep(sweep["path"])], fits[keep(fits["path"])], prediction.Node(slowdowns)
        )
        out[way] = table[table["ranks"] > 1]
    return out


def per_tensor_us(fits, key, library, way):
    """The per-tensor cost (microseconds) the model adds for the configuration `key` (GROUP's values)
    through `library` taken `way`: its framework's own library's path, else Horovod's through the
    instrument's binding or (`own`) its own binding's where the sweep has it."""
    framework = key[0]
    path = framework if library != HOROVOD else HOROVOD
    if library == HOROVOD and way == "own" and (fits["path"] == binding_path(framework)).any():
        path = binding_path(framework)
    value = fits.loc[fits["path"] == path, "per_tensor_s"].dropna()
    return round(value.iloc[0] * 1e6, 1) if len(value) else None


def rows_of(sweep_index, tables, fits, common):
    """The table's rows of one sweep: per configuration, then the median |error| over every run."""
    medians = {
        way: t.groupby(GROUP).agg(
            runs=("error_iteration", "size"),
            it=("error_iteration", "median"),
            cm=("error_comm_total", "median"),
            library=("allreduce_library", "first"),
        )
        for way, t in tables.items()
    }
    out = []
    for key, mine in medians["instrument"].iterrows():
        row = dict(zip(GROUP, key)) | {"sweep": sweep_index, "runs": int(mine["runs"])}
        for way in WAYS:
            row[f"error_iteration_{way}"] = round(medians[way].loc[key, "it"], 4)
            row[f"error_comm_total_{way}"] = round(medians[way].loc[key, "cm"], 4)
            row[f"per_tensor_us_{way}"] = per_tensor_us(fits, key, mine["library"], way)
        out.append(common | row)
    every = {"framework": "all", "model": "median |error|", "sweep": sweep_index, "runs": len(tables["own"])}
    for way, t in tables.items():
        every[f"error_iteration_{way}"] = round(t["error_iteration"].abs().median(), 4)
        every[f"error_comm_total_{way}"] = round(t["error_comm_total"].abs().median(), 4)
    return out + [common | every]


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("study", type=Path)
    ap.add_argument("--sweeps", type=int, default=3)
    ap.add_argument("--note", default="")
    ap.add_argument("--out", type=Path, default=ROOT / "bench" / "results" / "bindings-model.csv")
    args = ap.parse_args(argv)
    results = args.study / "results"
    kept = Path(tempfile.mkdtemp(prefix="sweep-kept-"))
    shutil.copytree(results / "allreduce", kept / "allreduce")
    common = {"date": datetime.date.today().isoformat(), "commit": commit(results), "note": args.note}
    common["machine"] = machine()
    study_inputs, rows = inputs(results), []
    try:
        for i in range(1, args.sweeps + 1):
            snakemake(args.study, "--forcerun", "allreduce", "--config", "allreduce_bindings=each")
            sweep, fits = (pd.read_csv(results / paths.TABLES[t]) for t in ("allreduce", "allreduce_fit"))
            rows += rows_of(i, model_both_ways(study_inputs, sweep, fits), fits, common)
            print(pd.DataFrame(rows[-1:]).to_string(index=False))
    finally:  # the study's own sweep back, and its tables made from it again
        shutil.rmtree(results / "allreduce")
        shutil.copytree(kept / "allreduce", results / "allreduce")
        snakemake(args.study, "--forcerun", "allreduce_tables")
    table = pd.DataFrame(rows, columns=COLUMNS).astype({"ranks": "Int64"})
    if args.out.exists():
        table = pd.concat([pd.read_csv(args.out), table], ignore_index=True)
    table.to_csv(args.out, index=False)
    print(f"wrote {len(rows)} rows to {args.out}")


if __name__ == "__main__":
    main()
