"""Benchmark record (not a test): the error rates of the study's three analyses of comparisons,
measured over many simulated studies with known answers. A simulated study is one configuration of
4 frameworks run once per block (the default study's design, 3 blocks), each run's log throughput
its framework's effect + its block's drift (up to `drift` x across blocks) + noise; in "identical"
the frameworks are the same (any difference called is an error), in "one 10% faster" one of them is
10% faster (the pairs it is in are called different: the power). Per analysis the share of studies
that call any difference (identical) or the share of the true differences found (one faster):

- block model: dlscale/analysis/blocks.py, Tukey over the configuration's pairs (the verdict);
- paired, unadjusted: each pair's own paired t at 5%;
- paired, Holm: the same p-values Holm-adjusted over the configuration's pairs (2 hypotheses each,
  as comparisons.py adjusts over a study).

Writes bench/results/block-error.csv (rows of the same scenario replaced).

  .venv/bin/python bench/block_error.py [--studies 2000] [--seed 1] [--out bench/results/block-error.csv]
"""

import argparse
import datetime
import math
import subprocess
import sys
from itertools import combinations
from pathlib import Path

import numpy as np
import pandas as pd

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from bench.overhead import machine  # noqa: E402
from dlscale.analysis import blocks, comparisons, metrics  # noqa: E402
from dlscale.core.vocabulary import CONFIG_KEYS  # noqa: E402

FRAMEWORKS = ("jax", "mxnet", "tensorflow", "torch")
SCENARIOS = {
    "identical": dict.fromkeys(FRAMEWORKS, 0.0),
    "one 10% faster": dict.fromkeys(FRAMEWORKS, 0.0) | {"mxnet": math.log(1.1)},
}


def runs_of(rates, model="m"):
    """A run-metrics table of one configuration: {framework: [throughput per block]}."""
    fixed = {k: None for k in CONFIG_KEYS} | {
        "model": model,
        "allreduce_schedule": "overlap",
        "layout": "best",
        "timing": "native",
    }
    fixed |= {
        "nodes": 1,
        "ranks_per_node": 2,
        "loader_workers": 1,
        "image_size": 64,
        "classes": 10,
        "batch_size": 8,
        "threads_per_rank": 1,
        "precision": "fp32",
        "ranks": 2,
    }
    rows = [
        fixed
        | {"framework": fw, "allreduce_library": "native" if fw == "jax" else "horovod", "repeat": k}
        | {"iteration_s": 16 / r, "throughput_img_per_s": r}
        for fw, per_block in rates.items()
        for k, r in enumerate(per_block)
    ]
    return pd.DataFrame(rows).reindex(columns=metrics.RUN_METRICS_COLUMNS)


def simulated(rng, effects, blocks_n=3, sd=0.03, drift=2.0, model="m"):
    """One configuration's runs of the frameworks `effects` names: each one's log rate = its effect
    (log) + its block's drift + normal noise of sd `sd` (log scale, about the run-to-run CV)."""
    shift = np.log(rng.uniform(1.0, drift, blocks_n))
    rates = {fw: np.exp(4 + effect - shift + rng.normal(0, sd, blocks_n)) for fw, effect in effects.items()}
    return runs_of(rates, model)


def called(runs):
    """Per analysis, the pairs (a, b framework names) it calls different in one configuration."""
    rows, _ = blocks.pair_rows(runs)
    block = {
        (a[0], b[0])
        for a, b, d, se, c in zip(rows["a"], rows["b"], rows["diff"], rows["se"], rows["crit"])
        if abs(d) > c * se
    }
    table = runs.pivot(index="repeat", columns="framework", values="throughput_img_per_s")
    pairs, p = list(combinations(sorted(table.columns), 2)), []
    for a, b in pairs:
        logs = np.log(table[a] / table[b])
        p.append(comparisons.tests(logs.mean(), logs.std(ddof=1) / math.sqrt(len(logs)), len(logs) - 1)[0])
    holm = comparisons.holm(p + [1.0] * len(p))[: len(p)]  # the equivalence hypotheses' places in the family
    return {
        "block model": block,
        "paired, unadjusted": {pair for pair, x in zip(pairs, p) if x < 0.05},
        "paired, Holm": {pair for pair, x in zip(pairs, holm) if x < 0.05},
    }


def rates(scenario, studies, seed, sd, drift):
    """Per analysis, the share of studies calling any difference (no true one) or of true differences found."""
    rng = np.random.default_rng(seed)
    effects = SCENARIOS[scenario]
    true = {(a, b) for a, b in combinations(sorted(effects), 2) if effects[a] != effects[b]}
    hits = {}
    for _ in range(studies):
        for analysis, found in called(simulated(rng, effects, sd=sd, drift=drift)).items():
            score = len(found & true) / len(true) if true else float(bool(found))
            hits[analysis] = hits.get(analysis, 0.0) + score
    return {analysis: total / studies for analysis, total in hits.items()}


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--studies", type=int, default=2000)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--sd", type=float, default=0.03, help="run-to-run noise, log scale")
    parser.add_argument("--drift", type=float, default=2.0, help="the most a block is slower than another")
    parser.add_argument("--out", default=str(ROOT / "bench" / "results" / "block-error.csv"))
    args = parser.parse_args(argv)
    commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True, cwd=ROOT)
    rows = []
    for scenario in SCENARIOS:
        for analysis, rate in rates(scenario, args.studies, args.seed, args.sd, args.drift).items():
            se = math.sqrt(rate * (1 - rate) / args.studies)
            rows.append(
                {
                    "scenario": scenario,
                    "analysis": analysis,
                    "measures": "studies calling any difference"
                    if scenario == "identical"
                    else "true differences found",
                    "rate": round(rate, 4),
                    "rate_ci_lo": round(max(rate - 1.96 * se, 0), 4),
                    "rate_ci_hi": round(min(rate + 1.96 * se, 1), 4),
                    "studies": args.studies,
                    "frameworks": len(FRAMEWORKS),
                    "blocks": 3,
                    "sd_log": args.sd,
                    "drift": args.drift,
                    "seed": args.seed,
                    "date": datetime.date.today().isoformat(),
                    "commit": commit.stdout.strip(),
                    "machine": machine(),
                }
            )
            print(f"{scenario:16s} {analysis:20s} {rate:.3f} [{rows[-1]['rate_ci_lo']}, {rows[-1]['rate_ci_hi']}]")
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    pd.DataFrame(rows).to_csv(out, index=False)
    print(f"wrote {out}")


if __name__ == "__main__":
    main()
