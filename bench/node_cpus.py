"""Benchmark record (not a test): what the CPUs a rank was allowed do to the model on one finished
study. The study's model (dlscale/analysis/prediction.py) is made twice from its own tables: with each
node's CPUs as its ranks recorded them (the host's logical CPUs, or ranks per node x the CPUs a rank's
affinity allowed where fewer: an emulated node's CPU set, a binding; the model as it is), and with the
host's logical CPUs (the model before ranks recorded their affinity), and a third time with no CPU shared between
compute and allreduce (the sweep's cores_used left out, as in a sweep made before it was recorded: what processor
sharing, model.shared_rate, adds to the prediction), and a fourth with the rates bench/sharing.py measured at
the configuration's place (bench/results/sharing.csv, its last row of the framework, network and place; 1-thread
configurations only) in place of the rule's. Per configuration of 2 or more
ranks, the median relative error of the predicted iteration over its repeats in each, the node's CPUs
and the shared rate each used. Writes bench/results/node-cpus.csv (rows of earlier studies kept).

  .venv/bin/python bench/node_cpus.py RESULTS [--note TEXT] [--out bench/results/node-cpus.csv]
      [--sharing bench/results/sharing.csv]
"""

import argparse
import datetime
import json
import subprocess
import sys
from pathlib import Path

import pandas as pd

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from bench.contention_model import KEYS as CONFIGURATION  # noqa: E402
from bench.contention_model import append_rows  # noqa: E402
from bench.overhead import machine  # noqa: E402
from dlscale.analysis import contention, prediction  # noqa: E402
from dlscale.analysis.model import Sharing  # noqa: E402
from dlscale.core.paths import TABLES  # noqa: E402

READ = {"keep_default_na": False, "na_values": [""]}
KEYS = CONFIGURATION + ["threads_per_rank"]


def host_cpus_only(cell):
    """A runs.csv `hardware` cell without what the ranks' affinity allowed (the host's CPUs only)."""
    if not isinstance(cell, str) or not cell.strip():
        return cell
    return json.dumps({h: {k: v for k, v in d.items() if k != "cpus_allowed"} for h, d in json.loads(cell).items()})


def place(run):
    """A run's place as bench/sharing.py names it."""
    if run["nodes"] == 1:
        return "one node"
    return f"{int(run['nodes'])} emulated nodes at {float(run['link_rate_mbit']):g} Mbit/s"


def measured(path=ROOT / "bench" / "results" / "sharing.csv"):
    """{(framework, model, place): model.Sharing} from bench/sharing.py's table, its last row of each."""
    table = pd.read_csv(path, **READ) if Path(path).is_file() else pd.DataFrame()
    if "place" not in table:  # rows from before the column: one node
        table["place"] = "one node"
    return {
        (r["framework"], r["model"], r["place"]): Sharing(min(1.0, r["compute_rate"]), min(1.0, r["comm_rate"]))
        for _, r in table.iterrows()
    }


def with_measured(rates):
    """model_table's `sharing`: a 1-thread run's measured rates at its place, else the rule's rate."""

    def sharing(run, rate):
        return rates.get((run["framework"], run["model"], place(run)), rate) if run["threads_per_rank"] == 1 else rate

    return sharing


def errors(results, recorded=True, sharing=True, rates=None):
    """Per configuration (KEYS) of 2 or more ranks: the median error of the predicted iteration, the
    node's CPUs and the shared rate (`recorded` False: the hosts' logical CPUs in place of the ranks'; `sharing` False:
    the allreduces taking no compute CPU; `rates`: measured rates in place of the rule's where there are)."""
    runs, status = pd.read_csv(results / TABLES["run_metrics"]), pd.read_csv(results / TABLES["runs"], **READ)
    if not recorded:
        status["hardware"] = status["hardware"].map(host_cpus_only)
    tensors = pd.read_csv(results / TABLES["tensors"])
    sweep, fits = pd.read_csv(results / TABLES["allreduce"]), pd.read_csv(results / TABLES["allreduce_fit"])
    if not sharing:
        sweep = sweep.drop(columns=["cores_used"], errors="ignore")
    path = results / TABLES["contention"]
    slowdowns = contention.slowdowns(pd.read_csv(path, **READ)) if path.is_file() else {}
    table, _, _ = prediction.model_table(
        runs, status, tensors, sweep, fits, prediction.Node(slowdowns, rates and with_measured(rates))
    )
    cpus = {tuple(r[k] for k in KEYS): prediction.node_cpus(r) for r in status.to_dict("records")}
    table = table[table["ranks"] > 1].dropna(subset=["error_iteration"])
    out = table.groupby(KEYS)[["error_iteration", "shared_rate", "link_rate_mbit"]].median()
    out["node_cpus"] = pd.array([cpus.get(k) for k in out.index], dtype="Int64")
    return out


def _measured_error(table, rates, key):
    """The configuration's error with its measured rates, or None where bench/sharing.py measured none."""
    identity = dict(zip(KEYS, key))
    run = {**identity, "link_rate_mbit": table["link_rate_mbit"][key]}
    if identity["threads_per_rank"] != 1 or (identity["framework"], identity["model"], place(run)) not in rates:
        return None
    return round(table["error_iteration"][key], 4)


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("results", type=Path)
    ap.add_argument("--note", default="")
    ap.add_argument("--out", default=str(ROOT / "bench" / "results" / "node-cpus.csv"))
    ap.add_argument("--sharing", default=str(ROOT / "bench" / "results" / "sharing.csv"), help="measured rates")
    args = ap.parse_args(argv)
    now, host = errors(args.results), errors(args.results, recorded=False)
    apart, rates = errors(args.results, sharing=False), measured(args.sharing)
    both = errors(args.results, rates=rates)
    commit = subprocess.run(["git", "-C", str(ROOT), "rev-parse", "--short", "HEAD"], capture_output=True, text=True)
    rows = [
        {
            **dict(zip(KEYS, key)),
            "node_cpus_host": host["node_cpus"][key],
            "shared_rate_host": round(host["shared_rate"][key], 4),
            "error_host_cpus": round(host["error_iteration"][key], 4),
            "node_cpus_recorded": r["node_cpus"],
            "shared_rate_recorded": round(r["shared_rate"], 4),
            "error_recorded_cpus": round(r["error_iteration"], 4),
            "error_no_sharing": round(apart["error_iteration"][key], 4),
            "error_measured_rates": _measured_error(both, rates, key),
            "study": args.results.name,
            "machine": machine(),
            "date": datetime.date.today().isoformat(),
            "commit": commit.stdout.strip(),
            "note": args.note,
        }
        for key, r in now.iterrows()
    ]
    if not rows:
        print(f"{args.results}: no predicted configuration of 2 or more ranks", file=sys.stderr)
        return 1
    append_rows(rows, args.out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
