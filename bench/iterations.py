"""Benchmark record (not a test): how many timed iterations a run of a study should have, from the study's own
results (tidy.csv, run_metrics.csv, runs.csv), after Kalibera & Jones (ISMM 2013). The block model's residual
variance per configuration is split into a part within runs (iterations' variance / iterations, larger by
(1 + r) / (1 - r) for a lag-1 autocorrelation r of its iterations, r corrected for its bias in a short series)
and a part between runs (what is left). With a run's fixed seconds (start, warm-up, traced iterations,
teardown: its elapsed time less its timed iterations) and an iteration's seconds, the iterations per run that
give the narrowest interval for the time are sqrt(fixed x within / (iteration x between)). time_ratio: the time
a study of this design spends for an interval at its iterations now, against at that optimum (1: optimal).

Writes bench/results/iterations.csv (rows of the same study replaced).

  .venv/bin/python bench/iterations.py RESULTS [RESULTS ...] [--name NAME] [--note TEXT] [--machine TEXT]
      [--out bench/results/iterations.csv]
"""

import datetime
import math
import sys
from pathlib import Path

import numpy as np
import pandas as pd

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from bench import studies  # noqa: E402
from dlscale.analysis import blocks, metrics  # noqa: E402
from dlscale.core import paths  # noqa: E402
from dlscale.core.vocabulary import RUN_KEYS  # noqa: E402

RHO = (-0.5, 0.9)  # the lag-1 autocorrelation's bounds in the inflation (a few iterations give a loose estimate)


def per_run(tidy):
    """Each run's steady iterations: their count, the variance of their log and their lag-1 autocorrelation."""
    steps, _ = metrics.steady_steps(tidy)
    rows = []
    for key, times in steps.groupby(RUN_KEYS, observed=True):
        x = np.log(times.to_numpy(dtype=float))
        rho = math.nan
        if len(x) >= 5 and np.ptp(x) > 0:  # less its bias in a short series, -(1 + 3 rho) / n (Marriott-Pope)
            rho = (float(np.corrcoef(x[:-1], x[1:])[0, 1]) * len(x) + 1) / (len(x) - 3)
        var = float(np.var(x, ddof=1)) if len(x) > 1 else math.nan
        rows.append(dict(zip(RUN_KEYS, key)) | {"n": len(x), "var": var, "rho": rho})
    return pd.DataFrame(rows, columns=RUN_KEYS + ["n", "var", "rho"])


def configurations(results):
    """One row per configuration of the block model: the variance parts, the costs and the optimal iterations."""
    results = Path(results)
    tidy = pd.read_csv(results / paths.TABLES["tidy"])
    runs = pd.read_csv(results / paths.TABLES["run_metrics"])
    status = pd.read_csv(results / paths.TABLES["runs"])[RUN_KEYS + ["elapsed_s"]]
    runs = runs.merge(per_run(tidy), on=RUN_KEYS).merge(status, on=RUN_KEYS)
    runs = runs[runs["throughput_img_per_s"] > 0].assign(ranks=lambda r: r["nodes"] * r["ranks_per_node"])
    fitted, _ = blocks.models(runs)
    rows = []
    for model, (_, group) in zip(fitted.to_dict("records"), runs.groupby(blocks.KEYS, observed=True, dropna=False)):
        rows.append({k: model[k] for k in blocks.KEYS} | _parts(group, model["residual_sd_log"]))
    return pd.DataFrame(rows)


def _parts(group, residual_sd):
    ok = group.dropna(subset=["var"])
    sd_iteration = math.sqrt(float(np.average(ok["var"], weights=ok["n"] - 1)))
    rho = float(np.clip(np.average(ok["rho"].fillna(0), weights=ok["n"]), *RHO))
    inflation = (1 + rho) / (1 - rho)
    within = sd_iteration**2 * inflation * float((1 / ok["n"]).mean())
    between = max(residual_sd**2 - within, 0.0)
    n, iteration_s = float(group["iterations"].median()), float(group["iteration_s"].median())
    fixed_s = float((group["elapsed_s"] - group["iterations"] * group["iteration_s"]).median())
    best = math.sqrt(fixed_s * sd_iteration**2 * inflation / (iteration_s * between)) if between > 0 else math.inf

    def spent(k):  # the variance of a run's log rate x the seconds it costs: what an interval's width costs
        return (between + sd_iteration**2 * inflation / k) * (fixed_s + k * iteration_s)

    return {
        "runs": len(group),
        "iterations": n,
        "iteration_s": round(iteration_s, 4),
        "run_fixed_s": round(fixed_s, 2),
        "sd_log_iteration": round(sd_iteration, 4),
        "lag1": round(rho, 3),
        "sd_log_within": round(math.sqrt(within), 4),
        "sd_log_between": round(math.sqrt(between), 4),
        "residual_sd_log": round(float(residual_sd), 4),
        "optimal_iterations": round(best, 1) if math.isfinite(best) else "",
        "time_ratio": round(spent(n) / spent(max(best, 1.0)), 3) if math.isfinite(best) else "",
    }


def main(argv=None):
    args = studies.arguments(__doc__, ROOT / "bench" / "results" / "iterations.csv", argv)
    made = []
    for results in args.results:
        table = configurations(results)
        table.insert(0, "study", args.name or str(results))
        made.append(table.assign(note=args.note, date=datetime.date.today().isoformat(), machine=args.machine))
        made[-1]["command"] = f".venv/bin/python bench/iterations.py {results}"
    made = pd.concat(made)
    print(made.drop(columns=["note", "machine", "command"]).to_string(index=False))
    studies.write(made, args.out)


if __name__ == "__main__":
    main()
