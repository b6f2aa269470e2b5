"""Table (not a test): Horovod against each framework's own library in a finished study.

Reads a study's summary.csv and model.csv (the study config/libraries.yaml makes, or any study with
`allreduce_library: [horovod, native]`) and writes one row per framework x network x comm x ranks x
library: throughput with its 95% interval, the ratio to Horovod's with its interval (the study's
comparisons.csv: the paired analysis's geometric mean over blocks, `differs` where its Holm-adjusted
verdict is that one is faster), the communication measured in the traces (all of it, and the part
hidden behind compute) and the model's median error for that configuration.

  .venv/bin/python bench/libraries.py results/libraries [--out bench/results/libraries-study.csv]
"""

import argparse
import sys
from pathlib import Path

import pandas as pd

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from bench.overhead import machine, write_table  # noqa: E402
from dlscale.core.paths import TABLES  # noqa: E402

KEYS = ["framework", "model", "allreduce_schedule", "nodes", "ranks_per_node", "ranks"]


def rows(results):
    summary = pd.read_csv(results / TABLES["summary"])
    model = pd.read_csv(results / TABLES["model"])
    pairs = pd.read_csv(results / TABLES["comparisons"])
    ratios = pairs[pairs["dimension"] == "allreduce_library"].set_index(KEYS)
    error = model.groupby(KEYS + ["allreduce_library"])["error_iteration"].median()
    out = []
    for r in summary[summary["repeats_ok"] > 0].sort_values(KEYS + ["allreduce_library"]).to_dict("records"):
        key = tuple(r[k] for k in KEYS)
        ratio = ratios.loc[key] if key in ratios.index else None
        native = r["allreduce_library"] == "native" and ratio is not None
        out.append(
            {
                **{k: r[k] for k in KEYS},
                "allreduce_library": r["allreduce_library"],
                "img_per_s": round(r["throughput_img_per_s"], 3),
                "img_per_s_ci_lo": round(r["throughput_img_per_s_ci_lo"], 3),
                "img_per_s_ci_hi": round(r["throughput_img_per_s_ci_hi"], 3),
                "native_over_horovod": round(ratio["ratio"], 4) if native else "",
                "ratio_ci_lo": round(ratio["ratio_ci_lo"], 4) if native else "",
                "ratio_ci_hi": round(ratio["ratio_ci_hi"], 4) if native else "",
                "differs": ("yes" if ratio["verdict"].endswith("faster") else "no") if native else "",
                "comm_total_s": round(r.get("comm_total_s", float("nan")), 4),
                "overlap_s": round(r.get("overlap_s", float("nan")), 4),
                "model_error_iteration": round(error.get(key + (r["allreduce_library"],), float("nan")), 4),
                "repeats": int(r["repeats_ok"]),
                "machine": machine(),
            }
        )
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("results", type=Path, help="a finished study's results folder")
    ap.add_argument("--out", default=str(ROOT / "bench" / "results" / "libraries-study.csv"))
    args = ap.parse_args()
    table = rows(args.results)
    if not table:
        sys.exit(f"{args.results}: no successful configuration in {TABLES['summary']}")
    for r in table:
        print(
            f"{r['framework']} {r['model']} {r['ranks']} ranks {r['allreduce_library']}: {r['img_per_s']} img/s"
            + (
                f", native/horovod {r['native_over_horovod']} ({r['ratio_ci_lo']}-{r['ratio_ci_hi']})"
                if r["differs"]
                else ""
            )
        )
    write_table(table, args.out)


if __name__ == "__main__":
    main()
