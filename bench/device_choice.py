"""Benchmark record (not a test): the buyer's question in miniature, the planner against measurement.

On a 2-core machine "one big device" is 1 rank x 2 threads and "two small devices" 2 ranks x 1
thread, on one node or on two emulated nodes. Two finished studies measured them:
config/device-choice.yaml (one node: threads_per_rank [1, 2] x ranks_per_node [1, 2]) and
config/device-choice-emulated.yaml (two emulated nodes at 500 Mbit/s, 1 thread per rank). The
planner (`dlscale plan`, dlscale/analysis/plan.py) predicts each option from the first study's
1-rank runs and the allreduce sweeps (one node's from the first study, the emulated link's from the
second); each row is an option of a framework and network, measured against predicted, and whether
the planner's verdict against the one big device (faster, slower, or equal within 5%) is the
measured one. Writes bench/results/device-choice.csv (the rows of these frameworks and networks
replaced).

  .venv/bin/python bench/device_choice.py results/device-choice results/device-choice-emulated

Given the one-node study alone, only its options are made again; the table keeps its rows of the
two-node option as they were (each row has its own date and commit).
"""

import argparse
import datetime
import json
import math
import subprocess
import sys
import tempfile
from pathlib import Path

import numpy as np
import pandas as pd
import yaml

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from bench.overhead import machine, merge_table, write_table  # noqa: E402
from dlscale.analysis import plan, student  # noqa: E402
from dlscale.analysis.metrics import Mean, ratio_ci  # noqa: E402
from dlscale.core.paths import TABLES  # noqa: E402

BIG = "one 2-thread device"
# option: (candidate for the planner, where and what the study measured: study, nodes, ranks per node, threads)
OPTIONS = {
    BIG: ({"threads_per_rank": 2}, (0, 1, 1, 2)),
    "two 1-thread devices, one node": ({"threads_per_rank": 1, "devices_per_node": 2}, (0, 1, 2, 1)),
    "two 1-thread devices, two nodes at 500 Mbit/s": (
        {"threads_per_rank": 1, "nodes": 2, "link_study": 1},
        (1, 2, 1, 1),
    ),
}
EQUAL = 0.05  # within this, two options are equal (the model is checked to 5%)
ROW_KEY = ("framework", "network", "option")
RATE = "throughput_img_per_s"
COMMAND = ".venv/bin/python bench/device_choice.py results/device-choice results/device-choice-emulated"


def options(studies):
    """The options the given studies measured: all with both, the one-node ones with the first alone."""
    return {name: option for name, option in OPTIONS.items() if option[1][0] < len(studies)}


def candidates(folder, studies):
    """The options as a candidates file for `dlscale plan`."""
    out = []
    for name, (candidate, _) in options(studies).items():
        c = {"name": name, **candidate}
        if "link_study" in c:
            c["link_study"] = str(Path(studies[c["link_study"]]).resolve())
        out.append(c)
    path = Path(folder) / "candidates.yaml"
    path.write_text(yaml.safe_dump({"candidates": out}))
    return path


def measured(studies):
    """{(framework, model, option): (img/s, 95% interval)} from the studies' summaries."""
    summaries = [pd.read_csv(Path(s) / TABLES["summary"]) for s in studies]
    out = {}
    for name, (_, (study, nodes, per_node, threads)) in options(studies).items():
        for r in _placement(nodes, per_node, threads)(summaries[study]).itertuples():
            ci = (r.throughput_img_per_s_ci_lo, r.throughput_img_per_s_ci_hi)
            out[(r.framework, r.model, name)] = (r.throughput_img_per_s, ci, r.repeats_ok)
    return out


def off_target(studies):
    """{(framework, model, option): why the model missed that placement in the study that measured
    it} (its model_error.json, split into compute and exposed communication)."""
    errors = [json.loads((Path(s) / TABLES["model_error"]).read_text())["off_target"] for s in studies]
    out = _baselines(studies) if len(studies) > 1 else {}
    for name, (_, (study, nodes, per_node, threads)) in options(studies).items():
        for r in errors[study]:
            if (r["nodes"], r["ranks_per_node"], r["threads_per_rank"]) == (nodes, per_node, threads):
                out[(r["framework"], r["model"], name)] = f"{Path(studies[study]).name}'s own model: {r['reason']}"
    return out


def _baselines(studies):
    """Where the emulated study's own model is within 5% at two nodes, the planner's miss is its
    compute baseline: the one-node study's 1-thread rank against the emulated node's."""
    names = [Path(s).name for s in studies]
    first, second = (pd.read_csv(Path(s) / TABLES["summary"]) for s in studies)
    out = {}
    for name, (_, (study, *_)) in OPTIONS.items():
        if study != 1:
            continue
        for r in second[(second["ranks"] == 1) & (second["threads_per_rank"] == 1)].itertuples():
            mine = first[(first.framework == r.framework) & (first.model == r.model) & (first.ranks == 1)]
            mine = mine[mine.threads_per_rank == 1]
            if len(mine):
                it = mine.iteration_s.iloc[0]
                out[(r.framework, r.model, name)] = (
                    f"the compute baseline: {names[0]}'s 1-thread rank (the planner's) iterates in {it:.3g} s, "
                    f"{names[1]}'s on an emulated node in {r.iteration_s:.3g} s ({it / r.iteration_s - 1:+.0%})"
                )
    return out


def verdict(rate, big):
    ratio = rate / big
    return "equal" if abs(ratio - 1) <= EQUAL else ("faster" if ratio > 1 else "slower")


def supported(lo, hi):
    """The verdict a measured ratio's 95% interval supports: faster or slower where it lies wholly beyond
    the 5% band on one side, equal where wholly within it, else unresolved (its repeats cannot tell)."""
    if not (lo > 0 and hi > 0):
        return "unresolved"
    if lo > 1 + EQUAL:
        return "faster"
    if hi < 1 - EQUAL:
        return "slower"
    return "equal" if lo >= 1 - EQUAL and hi <= 1 + EQUAL else "unresolved"


def ratios(studies, confidence=0.95):
    """{(framework, model, option): (option / the one big device, lower, upper)}: the measured throughput
    ratio with its 95% interval; paired by block (repeat) where the study that measured the option also
    measured the big device in the same blocks (the one-node study), else from the two independent means."""
    per_run = [pd.read_csv(Path(s) / TABLES["run_metrics"]) for s in studies]
    summaries = [pd.read_csv(Path(s) / TABLES["summary"]) for s in studies]
    big_study, *big_placement = OPTIONS[BIG][1]
    big = _placement(*big_placement)
    big_runs, big_summary = big(per_run[big_study]), big(summaries[big_study])
    out = {}
    for name, (_, (study, *placement)) in options(studies).items():
        if name == BIG:
            continue
        pick = _placement(*placement)
        for key, g in pick(per_run[study]).groupby(["framework", "model"]):
            if study == big_study:
                mine = big_runs[(big_runs.framework == key[0]) & (big_runs.model == key[1])]
                out[(*key, name)] = _paired(g, mine, confidence)
            else:
                out[(*key, name)] = _independent(pick(summaries[study]), big_summary, key)
    return out


def _placement(nodes, per_node, threads):
    """A table's rows of one placement: nodes, ranks per node, threads per rank."""
    return lambda t: t[(t["nodes"] == nodes) & (t["ranks_per_node"] == per_node) & (t["threads_per_rank"] == threads)]


def _paired(runs, big, confidence):
    both = runs[["repeat", RATE]].merge(big[["repeat", RATE]], on="repeat", suffixes=("", "_big"))
    logs = np.log(both[RATE] / both[f"{RATE}_big"]).dropna()
    if len(logs) < 2:
        return math.nan, math.nan, math.nan
    half = student.quantile(0.5 + confidence / 2, len(logs) - 1) * logs.std(ddof=1) / math.sqrt(len(logs))
    return math.exp(logs.mean()), math.exp(logs.mean() - half), math.exp(logs.mean() + half)


def _independent(option, big, key):
    def mean(table):
        r = table[(table.framework == key[0]) & (table.model == key[1])].iloc[0]
        return Mean(r[RATE], r["throughput_se"], int(r["repeats_ok"]))

    return ratio_ci(mean(option), mean(big))


def rows(studies):
    with tempfile.TemporaryDirectory() as tmp:
        table, _ = plan.plan(studies[0], candidates(tmp, studies))
    seen, why, measured_ratios = measured(studies), off_target(studies), ratios(studies)
    commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=ROOT, capture_output=True, text=True)
    out = []
    for r in table.itertuples():
        key = (r.framework, r.model, r.candidate)
        if key not in seen or (r.framework, r.model, BIG) not in seen:
            continue
        rate, (lo, hi), repeats = seen[key]
        big_measured = seen[(r.framework, r.model, BIG)][0]
        big_predicted = table[(table.framework == r.framework) & (table.model == r.model) & (table.candidate == BIG)]
        vs_measured = verdict(rate, big_measured) if r.candidate != BIG else ""
        vs_predicted = verdict(r.predicted_img_per_s, big_predicted.predicted_img_per_s.iloc[0]) if vs_measured else ""
        ratio, ratio_lo, ratio_hi = measured_ratios.get(key, (math.nan,) * 3)
        predicted_ratio = r.predicted_img_per_s / big_predicted.predicted_img_per_s.iloc[0]
        out.append(
            {
                "framework": r.framework,
                "network": r.model,
                "option": r.candidate,
                "measured_img_per_s": round(rate, 2),
                "measured_ci_lo": round(lo, 2),
                "measured_ci_hi": round(hi, 2),
                "repeats": repeats,
                "predicted_img_per_s": round(r.predicted_img_per_s, 2),
                "error": round(r.predicted_img_per_s / rate - 1, 4),
                "model_error": round(r.model_error, 4),
                "vs_big_measured": vs_measured,
                "vs_big_predicted": vs_predicted,
                "verdicts_agree": "" if not vs_measured else vs_measured == vs_predicted,
                "ratio_measured": _round(ratio),
                "ratio_ci_lo": _round(ratio_lo),
                "ratio_ci_hi": _round(ratio_hi),
                "ratio_predicted": _round(predicted_ratio) if vs_measured else "",
                "vs_big_supported": supported(ratio_lo, ratio_hi) if vs_measured else "",
                "prediction_in_interval": "" if not vs_measured else bool(ratio_lo <= predicted_ratio <= ratio_hi),
                "miss_reason": why.get(key, "") if abs(r.predicted_img_per_s / rate - 1) > EQUAL else "",
                "compute_from": r.compute_from,
                "link_from": r.link_from,
                "machine": machine(),
                "date": datetime.date.today().isoformat(),
                "commit": commit.stdout.strip(),
                "command": f"{COMMAND.split(' results/')[0]} {' '.join(f'results/{Path(s).name}' for s in studies)}",
            }
        )
    return out


def _round(x):
    return "" if math.isnan(x) else round(x, 4)


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("one_node", help="results of config/device-choice.yaml")
    ap.add_argument("two_nodes", nargs="?", help="results of config/device-choice-emulated.yaml (none: its rows kept)")
    ap.add_argument("--out", default=str(ROOT / "bench" / "results" / "device-choice.csv"))
    args = ap.parse_args(argv)
    found = rows([Path(args.one_node)] + ([Path(args.two_nodes)] if args.two_nodes else []))
    if not found:
        print("no option measured and predicted in both studies", file=sys.stderr)
        return 1
    for r in found:
        verdicts = f"{r['vs_big_measured']}/{r['vs_big_predicted']}"
        print(
            f"{r['framework']:10} {r['network']:9} {r['option']:46} measured {r['measured_img_per_s']:8.2f} "
            f"predicted {r['predicted_img_per_s']:8.2f} ({r['error']:+.1%}) {verdicts}"
        )
    write_table(found if args.two_nodes else merge_table(found, args.out, ROW_KEY), args.out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
