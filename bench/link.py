"""Benchmark (not a test): what one gradient exchange costs on an emulated link, per TCP congestion
control of the emulated nodes and per Open MPI TCP protocol.

On an emulated cluster of 2 nodes (dlscale/runtime/emulate.py; needs root), one rank each, with
config/emulated.yaml's link rate and rank environment, two ranks allreduce through Horovod
(PyTorch, averaged, in place): AlexNet's 16 gradients in one grouped allreduce (`all`: Horovod
fuses them into two buffers, the 151 MB fc6 weight alone and the other 93 MB, reduced back to
back, as every hand-over after backward sends them), each of the two buffers alone (`largest`,
`rest`), and 256 MiB in 4 tensors (`sweep_256MiB`, the sweep's largest message). Each case runs
2 warm-ups, then --reps repetitions, each after a barrier. A variant is the emulated nodes' TCP
congestion control and the ranks' environment: `cubic` and `bbr` run config/emulated.yaml's, `put`
runs it with Open MPI's default TCP flags (its `put` protocol, which config/emulated.yaml turns off),
`put-1MiB` with them and `put` in 1 MiB fragments. --cases picks the cases a job runs. Trials
alternate which variant goes first; every repetition of every trial is pooled. `slow` counts
repetitions over 1.25x the fastest of their case. While a trial runs, the bytes each node has
sent (its eth0 queue's counter) are read every 50 ms: `both_share` is the share of the intervals with traffic in which
both directions carried over 10 MB/s (a two-rank ring sends both ways at once: near 1), and
`half_duplex_trials` counts the trials in which it was under 0.5 (the two directions took turns).

  .venv/bin/python bench/link.py [--rate-mbit 500] [--reps 6] [--trials 2] \
      [--variants cubic bbr put put-1MiB] [--cases all largest rest sweep_256MiB] [--out bench/results/link.csv]
"""

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from bench.overhead import machine, write_table  # noqa: E402
from dlscale.runtime import emulate, launch, launchers  # noqa: E402

MIB = 1 << 20
# Open MPI 4.1's default TCP transport flags, `put` among them
OMPI_TCP_FLAGS = "send,put,inplace,need-ack,need-csum,hetero-rdma"
VARIANTS = {
    "cubic": ("cubic", {}),
    "bbr": ("bbr", {}),
    "put": ("cubic", {"OMPI_MCA_btl_tcp_flags": OMPI_TCP_FLAGS}),
    "put-1MiB": (
        "cubic",
        {"OMPI_MCA_btl_tcp_flags": OMPI_TCP_FLAGS, "OMPI_MCA_btl_tcp_rdma_pipeline_frag_size": str(MIB)},
    ),
}
CASES = ("all", "largest", "rest", "sweep_256MiB")


def rank_main(reps, cases, out):
    """One rank: each case asked for, timed on rank 0, written to `out` as {case: [bytes, [seconds...]]}."""
    import horovod.torch as hvd
    import torch

    from dlscale.workloads.registry import build_model

    hvd.init()
    torch.set_num_threads(1)
    grads = [torch.ones_like(p) for p in build_model("torch", "alexnet", classes=1000, image_size=64).parameters()]
    largest = max(grads, key=lambda g: g.numel())
    rest = [g for g in grads if g is not largest]
    sweep = [torch.ones(256 * MIB // 16) for _ in range(4)]
    tensors_of = {"all": grads, "largest": [largest], "rest": rest, "sweep_256MiB": sweep}
    times = {}
    for name in cases:
        tensors = tensors_of[name]
        seconds = []
        for i in range(reps + 2):
            hvd.allreduce(torch.zeros(1), name="barrier")
            start = time.perf_counter()
            hvd.grouped_allreduce_(tensors, op=hvd.Average)
            if i >= 2:
                seconds.append(time.perf_counter() - start)
        times[name] = [sum(t.numel() * 4 for t in tensors), seconds]
    if hvd.rank() == 0:
        Path(out).write_text(json.dumps(times))


def trial(variant, rate_mbit, reps, cases, tmp):
    """One mpirun job on a fresh 2-node cluster: ({case: [bytes, [seconds...]]}, both_share)."""
    congestion_control, overrides = VARIANTS[variant]
    config = yaml.safe_load((ROOT / "config" / "emulated.yaml").read_text())
    env = {
        **launch.thread_env(1),
        "PYTHONPATH": str(ROOT),
        **{k: str(v) for k, v in config["launcher"]["env"].items()},
        **overrides,
    }
    out = Path(tmp) / f"{variant}.json"
    out.unlink(missing_ok=True)
    with emulate.cluster(2, rate_mbit, 0, congestion_control=congestion_control) as cluster:
        command = [sys.executable, __file__, "--rank", "--reps", str(reps), "--cases", *cases, "--out", str(out)]
        job = launchers.Job(cluster.hosts, 1, command, env, as_root=os.geteuid() == 0)
        argv = launchers.mpirun_argv(job, launchers.LOCAL)
        log = Path(tmp) / f"{variant}.log"
        with open(log, "w") as stderr:  # a file, not a pipe: a chatty job cannot fill it and stall
            proc = subprocess.Popen(
                cluster.wrap(argv),
                env={**os.environ, **cluster.launch_env()},
                stdout=subprocess.DEVNULL,
                stderr=stderr,
                text=True,
            )
            samples, deadline = [], time.perf_counter() + 1800
            while proc.poll() is None:
                if time.perf_counter() > deadline:
                    proc.kill()
                    proc.wait()
                    break
                samples.append((time.perf_counter(), *(sent_bytes(ns) for ns in cluster.namespaces)))
                time.sleep(0.05)
    if proc.returncode != 0 or not out.exists():
        raise SystemExit(
            f"{variant}: mpirun exited with {proc.returncode} (killed after 1800 s if negative)\n"
            f"{log.read_text()[-3000:]}"
        )
    return json.loads(out.read_text()), both_share(samples)


def sent_bytes(ns):
    """Bytes node `ns` has sent (the counter of its eth0 queue)."""
    text = subprocess.run(["tc", "-s", "-n", ns, "qdisc", "show", "dev", "eth0"], capture_output=True, text=True).stdout
    return int(text.split("Sent ", 1)[1].split()[0])


def both_share(samples, busy=10e6):
    """Of the sampling intervals in which either node sent over `busy` bytes/s, the share in which
    both did. `samples`: (time, bytes sent by node 0, by node 1)."""
    both = either = 0
    for (t0, a0, b0), (t1, a1, b1) in zip(samples, samples[1:]):
        rates = [(a1 - a0) / (t1 - t0), (b1 - b0) / (t1 - t0)]
        either += max(rates) > busy
        both += min(rates) > busy
    return both / either if either else float("nan")


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--rate-mbit", type=float, default=500)
    ap.add_argument("--reps", type=int, default=6)
    ap.add_argument("--trials", type=int, default=2)
    ap.add_argument("--variants", nargs="+", default=["cubic", "bbr", "put"], choices=list(VARIANTS))
    ap.add_argument("--out", default=str(ROOT / "bench" / "results" / "link.csv"))
    ap.add_argument("--cases", nargs="+", default=list(CASES), choices=CASES)
    ap.add_argument("--rank", action="store_true", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.rank:
        return rank_main(args.reps, args.cases, args.out)
    ok, why = emulate.available()
    if not ok:
        raise SystemExit(f"bench/link.py needs emulated clusters: {why}")
    pooled, shares = {}, {}
    with tempfile.TemporaryDirectory() as tmp:
        for t in range(args.trials):
            names = args.variants
            for name in names[t % len(names) :] + names[: t % len(names)]:
                times, share = trial(name, args.rate_mbit, args.reps, args.cases, tmp)
                shares.setdefault(name, []).append(share)
                for case, (nbytes, seconds) in times.items():
                    pooled.setdefault((name, case), [nbytes, []])[1].extend(seconds)
                    print(f"trial {t} {name:6s} {case:13s} " + " ".join(f"{s:.2f}" for s in seconds), flush=True)
                print(f"trial {t} {name:6s} both directions busy in {share:.0%} of the busy intervals", flush=True)
    rows = []
    for (name, case), (nbytes, seconds) in pooled.items():
        median = statistics.median(seconds)
        congestion_control, overrides = VARIANTS[name]
        rows.append(
            {
                "variant": name,
                "congestion_control": congestion_control,
                "btl_tcp_flags": overrides.get("OMPI_MCA_btl_tcp_flags", "config/emulated.yaml"),
                "case": case,
                "bytes": nbytes,
                "rate_mbit": args.rate_mbit,
                "trials": args.trials,
                "repetitions": len(seconds),
                "median_s": round(median, 3),
                "mean_s": round(statistics.mean(seconds), 3),
                "min_s": round(min(seconds), 3),
                "max_s": round(max(seconds), 3),
                "slow": sum(s > 1.25 * min(seconds) for s in seconds),
                "median_mb_per_s": round(nbytes / median / 1e6, 1),
                "both_share": round(statistics.median(shares[name]), 2),
                "half_duplex_trials": sum(s < 0.5 for s in shares[name]),
                "machine": machine(),
            }
        )
    write_table(rows, args.out)


if __name__ == "__main__":
    main()
