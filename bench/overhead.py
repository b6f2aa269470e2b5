"""Benchmark (not a test): does the harness's instrumentation slow training down?

Runs the harness's workload of one framework and a bare training loop of that framework
(bench/bare_<framework>.py) with the same model, batch, input size, threads and data, alternately,
several times, one rank each through the same mpirun, and prints the median throughputs and their
ratio. The harness's throughput is the one it reports itself (batch / mean iteration wall time over
measured iterations). Target: >= 0.97. With --device gpu both use GPU 0 (in the cuda environment:
DLSCALE_ENV_VARIANT=cuda) and copy every batch from pinned host memory; --precision mixed makes both
run float16 with loss scaling.

  .venv/bin/python bench/overhead.py [--framework torch] [--model resnet50] [--batch-size 8]
                     [--image-size 112] [--threads 1] [--iterations 20] [--trials 5]
                     [--device cpu|gpu] [--precision fp32|mixed]
"""

import argparse
import json
import os
import statistics
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from harness import launch  # noqa: E402
from harness.records import parse_file  # noqa: E402


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--framework", default="torch", choices=["torch", "tensorflow", "mxnet"])
    ap.add_argument("--model", default="resnet50")
    ap.add_argument("--batch-size", type=int, default=8)
    ap.add_argument("--image-size", type=int, default=112)
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--warmup", type=int, default=3)
    ap.add_argument("--iterations", type=int, default=20)
    ap.add_argument("--trials", type=int, default=5)
    ap.add_argument("--device", default="cpu", choices=["cpu", "gpu"])
    ap.add_argument("--precision", default="fp32", choices=["fp32", "mixed"])
    args = ap.parse_args()

    spec = {"framework": args.framework, "model": args.model, "comm": "overlap", "nodes": 1, "ranks_per_node": 1,
            "batch_size": args.batch_size, "image_size": args.image_size, "classes": 1000,
            "threads_per_rank": args.threads, "precision": args.precision, "device": args.device, "repeat": 0, "warmup": args.warmup,
            "iterations": args.iterations, "lr": 0.01, "momentum": 0.9, "seed": 0}
    env = launch.rank_env({"threads_per_rank": args.threads, "launcher": {}})
    harness, bare = [], []
    with tempfile.TemporaryDirectory() as tmp:
        for trial in range(args.trials):
            out = Path(tmp) / f"trial{trial}"
            out.mkdir()
            spec_path = out / "spec.json"
            spec_path.write_text(json.dumps({**spec, "out_dir": str(out)}))
            for kind, command in (("bare", [sys.executable, str(ROOT / "bench" / f"bare_{args.framework}.py"), str(spec_path)]),
                                  ("harness", launch.workload_command(sys.executable, spec_path))):
                argv = launch.mpirun_argv(["localhost"], 1, {"name": "mpirun", "bind_to": "none"}, command, env,
                                          as_root=os.geteuid() == 0)
                log = out / f"{kind}.log"
                rc, _ = launch.execute(argv, log, timeout_s=1800)
                if rc != 0:
                    sys.exit(f"{kind} run failed; see its log:\n{log.read_text()[-3000:]}")
                if kind == "bare":
                    line = [ln for ln in log.read_text().splitlines() if ln.startswith("{")][-1]
                    bare.append(json.loads(line)["throughput_img_per_s"])
                else:
                    recs, errors = parse_file(out / "rank0.jsonl")
                    device = next(r for r in recs if r["kind"] == "run")["provenance"]["framework"].get("gpu_name") or "cpu"
                    walls = [r["wall_s"] for r in recs if r["kind"] == "step" and not r["warmup"]]
                    harness.append(args.batch_size / statistics.mean(walls))
            print(f"trial {trial}: bare {bare[-1]:.2f} img/s, harness {harness[-1]:.2f} img/s", flush=True)
    hb, bb = statistics.median(harness), statistics.median(bare)
    paired = statistics.median(h / b for h, b in zip(harness, bare))
    print(f"{args.framework} {args.model} on {device}, {args.precision}, batch {args.batch_size} "
          f"{args.image_size}x{args.image_size}, {args.threads} threads, {args.iterations} iterations x {args.trials} trials")
    print(f"median throughput: harness {hb:.2f} img/s, bare loop {bb:.2f} img/s, ratio {hb / bb:.3f}; "
          f"median of paired ratios {paired:.3f}")


if __name__ == "__main__":
    main()
