"""Benchmark (not a test): the layouts each framework can run, against each other, in the harness.

`layout: best` is what each framework's own performance guidance recommends for the device (its
package's BEST_LAYOUT, dlscale/workloads/frameworks/<name>/__init__.py); this confirms it on the machine at
hand. For every framework and every layout its models can run (PyTorch NCHW and NHWC =
channels_last; TensorFlow NHWC; MXNet NCHW), runs the harness in native timing on one rank, the
layouts of a framework in a rotating order, several paired trials, and prints per model the
median throughput of each layout and the median of the paired ratios against the framework's
`best` one, with their spread. Writes bench/results/layout.csv.

  .venv/bin/python bench/layout.py [--framework torch] [--model resnet50 googlenet alexnet]
      [--batch-size 8] [--image-size 64] [--iterations 10] [--trials 5]
"""

import argparse
import json
import statistics
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from overhead import framework_python, harness_spec, machine, study_rank_env, throughput, write_table  # noqa: E402

from dlscale.runtime import execution, launch, launchers  # noqa: E402
from dlscale.workloads import frameworks  # noqa: E402


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--framework", nargs="+", default=list(frameworks.NAMES), choices=frameworks.NAMES)
    ap.add_argument("--model", nargs="+", default=["resnet50", "googlenet", "alexnet"])
    ap.add_argument("--batch-size", type=int, default=8)
    ap.add_argument("--image-size", type=int, default=64)
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--warmup", type=int, default=2)
    ap.add_argument("--iterations", type=int, default=10)
    ap.add_argument("--trials", type=int, default=5)
    ap.add_argument("--out", default=str(ROOT / "bench" / "results" / "layout.csv"))
    args = ap.parse_args()
    spec = harness_spec(args, timing="native", ranks_per_node=1)
    env = study_rank_env(args.threads)
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        for framework in args.framework:
            layouts = frameworks.get(framework).LAYOUTS
            for model in args.model:
                got = {layout: [] for layout in layouts}
                for trial in range(args.trials):
                    order = layouts[trial % len(layouts) :] + layouts[: trial % len(layouts)]
                    for layout in order:
                        out = Path(tmp) / f"{framework}_{model}_{layout}_{trial}"
                        out.mkdir()
                        (out / "spec.json").write_text(
                            json.dumps(
                                {
                                    **spec,
                                    "framework": framework,
                                    "allreduce_library": frameworks.default_library(framework),
                                    "model": model,
                                    "layout": layout,
                                    "out_dir": str(out),
                                }
                            )
                        )
                        command = launch.workload_command(framework_python(framework), out / "spec.json")
                        argv = launchers.local_argv(1, command, env)
                        rc, _ = execution.execute(argv, out.parent / f"{out.name}.log", timeout_s=1800)
                        if rc != 0:
                            sys.exit(f"{framework} {model} {layout} failed; see {out.parent / f'{out.name}.log'}")
                        got[layout].append(throughput("harness", out.parent, spec, 1, records=out))
                best = frameworks.get(framework).BEST_LAYOUT
                for layout in layouts:
                    ratios = [a / b for a, b in zip(got[layout], got[best])]
                    rows.append(
                        {
                            "framework": framework,
                            "model": model,
                            "layout": layout,
                            "best": layout == best,
                            "img_per_s": round(statistics.median(got[layout]), 3),
                            "ratio_to_best": round(statistics.median(ratios), 4),
                            "ratio_min": round(min(ratios), 4),
                            "ratio_max": round(max(ratios), 4),
                            "trials": args.trials,
                            "batch_size": args.batch_size,
                            "image_size": args.image_size,
                            "threads": args.threads,
                            "machine": machine(),
                        }
                    )
                    r = rows[-1]
                    print(
                        f"{framework} {model} {layout}{' (best)' if r['best'] else ''}: {r['img_per_s']:.2f} img/s, "
                        f"x{r['ratio_to_best']:.3f} of best (min {r['ratio_min']:.3f}, max {r['ratio_max']:.3f})",
                        flush=True,
                    )
    write_table(rows, args.out)


if __name__ == "__main__":
    main()
