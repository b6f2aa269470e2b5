"""Benchmark (not a test): how fast compute and an allreduce each go while both run on one node, the
rates the performance model's processor sharing (dlscale.analysis.model.shared_rate) assumes equal,
from the CPUs a rank has over the threads it runs.

Per framework and model, four kinds in rotating order, several trials, in `phased` timing:
- pair: two independent 1-thread 1-rank runs at once (compute only: what bench/contention.py calls pair,
  the pipeline's contention calibration together);
- pair_loop: the same two runs with a 2-rank allreduce of BYTES (bench/allreduce_loop.py, the framework's
  default library, as the sweep times it) repeated beside them for as long as they run;
- loop: that allreduce alone;
- ranks2: one 2-rank run of the same (allreduce_schedule overlap: its allreduces beside backward), the
  training whose iteration the model predicts.
With --emulated MBIT the same on two emulated nodes of one CPU set each joined at that rate (root): the pair
one run on each node, the loop and the 2-rank run a rank on each (the device-choice-emulated study's place).
Per trial, compute_rate = pair / pair_loop compute seconds per iteration (forward + backward + update, over
the steps both runs measured at once: a remote node's run begins later), comm_rate = loop / pair_loop allreduce
seconds (the repetitions in that window), and
training_rate = pair / ranks2 compute seconds (the slowest rank's: what the 2-rank run's own allreduces
beside its compute cost it); the median over trials with min and max, beside the rule's rate from the
allreduce's own cores in use. The pair and the loop share the CPUs as one mpirun job's threads do: in one
session (Linux's autogroup scheduler shares the CPUs among sessions first, then among a session's threads).
Writes bench/results/sharing.csv (rows of earlier runs kept).

  .venv/bin/python bench/sharing.py [--framework torch tensorflow jax] [--model resnet50 alexnet]
      [--bytes 67108864] [--trials 3] [--iterations 20] [--loop-s 8] [--emulated MBIT] [--note TEXT]
"""

import argparse
import datetime
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from contention import compute_s  # noqa: E402
from overhead import append_table, framework_python, harness_spec, machine, study_rank_env  # noqa: E402

from dlscale.analysis.model import shared_rate  # noqa: E402
from dlscale.core.records import parse_file  # noqa: E402
from dlscale.core.vocabulary import HOSTS_ENV, records_name  # noqa: E402
from dlscale.runtime import emulate, launch, launchers  # noqa: E402
from dlscale.workloads import frameworks  # noqa: E402

KINDS = ("pair", "pair_loop", "loop", "ranks2")
READY_TIMEOUT_S = 300
COLUMNS = [
    "framework",
    "model",
    "allreduce_library",
    "place",
    "bytes",
    "compute_rate",
    "compute_rate_min",
    "compute_rate_max",
    "comm_rate",
    "comm_rate_min",
    "comm_rate_max",
    "training_rate",
    "training_rate_min",
    "training_rate_max",
    "rule_rate",
    "loop_cores",
    "pair_compute_s",
    "loop_alone_s",
    "beside_repetitions",
    "trials",
    "batch_size",
    "image_size",
    "iterations",
    "node_cpus",
    "machine",
    "date",
    "commit",
    "note",
]


class Place:
    """Where the jobs run, each started in this session (one autogroup, as one mpirun job's threads): this
    machine's CPUs, or an emulated cluster's nodes (`cluster`), a 1-rank job on node `node`, a 2-rank job a rank on
    each, every node on its own CPU set as in a study."""

    def __init__(self, cluster=None):
        self.cluster = cluster

    def start(self, ranks, node, command, env, log):
        # a session directory of its own: two mpiruns starting at once may fail one (launchers.apart)
        session = tempfile.mkdtemp(prefix="dlscale-bench-")
        root, launcher = os.geteuid() == 0, launchers.apart(launchers.LOCAL, session)
        if self.cluster is None:
            argv, penv = (
                launchers.mpirun_argv(launchers.Job(["localhost"], ranks, command, env, as_root=root), launcher),
                None,
            )
        else:
            hosts = self.cluster.hosts[:ranks] if ranks > 1 else [self.cluster.hosts[node]]
            job = launchers.Job(hosts, 1, command, {**env, HOSTS_ENV: ",".join(hosts)}, as_root=root)
            argv = self.cluster.wrap(launchers.EMULATED.argv(job, launcher))
            penv = {**os.environ, **self.cluster.launch_env()}
        return subprocess.Popen(argv, stdout=log, stderr=subprocess.STDOUT, env=penv)

    def run(self, spec, folder, ranks, env, node=0):
        """A training run of `ranks` ranks of `spec` in `folder`, started (on node `node` when 1 rank)."""
        folder.mkdir(parents=True)
        nodes, per_node = (1, ranks) if self.cluster is None else (ranks, 1)
        spec = {**spec, "nodes": nodes, "ranks_per_node": per_node, "out_dir": str(folder)}
        (folder / "spec.json").write_text(json.dumps(spec))
        command = launch.workload_command(framework_python(spec["framework"]), folder / "spec.json")
        return self.start(ranks, node, command, env, open(folder.parent / f"{folder.name}.log", "w"))

    def node_cpus(self):
        """A node's CPUs: this machine's, or an emulated node's set."""
        return len(os.sched_getaffinity(0)) if self.cluster is None else len(self.cluster.cpus[0].split(","))

    def ranks_per_node(self):
        return 2 if self.cluster is None else 1

    def describe(self):
        if self.cluster is None:
            return "one node"
        return f"{self.cluster.nodes} emulated nodes at {self.cluster.rate_mbit:g} Mbit/s"


class Loop:
    """bench/allreduce_loop.py on 2 ranks, started and warm; `stop` ends it and returns its lines."""

    def __init__(self, place, framework, nbytes, folder, env):
        folder.mkdir(parents=True)
        self.out, self.ready, self.halt = folder / "loop.jsonl", folder / "READY", folder / "STOP"
        command = [framework_python(framework), str(ROOT / "bench" / "allreduce_loop.py"), str(self.out)]
        command += [framework, str(nbytes), str(self.ready), str(self.halt)]
        self.proc = place.start(2, None, command, env, open(folder / "loop.log", "w"))
        deadline = time.monotonic() + READY_TIMEOUT_S
        while not self.ready.exists():
            if self.proc.poll() is not None or time.monotonic() > deadline:
                self.proc.kill()
                sys.exit(f"the allreduce loop did not start; see {folder / 'loop.log'}")
            time.sleep(0.05)

    def stop(self):
        self.halt.touch()
        if self.proc.wait(timeout=READY_TIMEOUT_S) != 0:
            sys.exit(f"the allreduce loop failed; see {self.out.parent / 'loop.log'}")
        return [json.loads(line) for line in self.out.read_text().splitlines()]


COMPUTE = ("forward_s", "backward_s", "update_s")
LEAST_STEPS = 3  # of each run inside the runs' common window


def measured_steps(folder):
    """A 1-rank run's measured steps with the unix s each began and ended (a record's `time`: when written)."""
    records, errors = parse_file(Path(folder) / records_name(0))
    if errors:
        sys.exit(f"{folder}: {errors[0]}")
    steps = [r for r in records if r["kind"] == "step" and not r["warmup"]]
    return [{**r, "began": r["time"] - r["wall_s"]} for r in steps]


def together(folders, out):
    """(first, last, mean compute s per step) over the runs' steps inside the window all were measuring in:
    runs started at once begin at different times (a remote node's later), and a step alone is not a pair's."""
    runs = [measured_steps(f) for f in folders]
    first, last = max(r[0]["began"] for r in runs), min(r[-1]["time"] for r in runs)
    inside = [[s for s in r if s["began"] >= first and s["time"] <= last] for r in runs]
    if min(map(len, inside)) < LEAST_STEPS:
        sys.exit(f"{out}: fewer than {LEAST_STEPS} steps of each run measured at once; ask for more --iterations")
    return first, last, statistics.mean(statistics.mean(sum(s[k] for k in COMPUTE) for s in r) for r in inside)


def pair(place, spec, out, env):
    """Two 1-rank runs at once in out/p0, out/p1 (on nodes 0 and 1 of a cluster): their folders."""
    procs = [place.run({**spec, "seed": s}, out / f"p{s}", 1, env, node=s) for s in (0, 1)]
    if any(p.wait() != 0 for p in procs):
        sys.exit(f"a run of the pair failed; see the logs in {out}")
    return [out / "p0", out / "p1"]


def trial(place, kind, spec, nbytes, out, env, loop_s):
    """{compute_s, loop_s, cores, repetitions} of one trial of `kind` (those it measures)."""
    if kind == "pair":
        return {"compute_s": together(pair(place, spec, out, env), out)[2]}
    if kind == "ranks2":
        if place.run(spec, out / "r2", 2, env).wait() != 0:
            sys.exit(f"the 2-rank run failed; see {out / 'r2.log'}")
        return {"compute_s": compute_s(out / "r2", 2)}
    loop = Loop(place, spec["framework"], nbytes, out / "loop", env)
    if kind == "loop":
        time.sleep(loop_s)
        lines = loop.stop()
        return {"loop_s": statistics.median(r["s"] for r in lines), "cores": statistics.mean(r["cores"] for r in lines)}
    folders = pair(place, spec, out, env)
    lines = loop.stop()
    first, last, compute = together(folders, out)
    inside = [r["s"] for r in lines if r["unix_s"] >= first and r["unix_s"] + r["s"] <= last]
    if len(inside) < LEAST_STEPS:
        sys.exit(f"{out}: {len(inside)} allreduces while both runs were measuring; ask for more --iterations")
    return {"compute_s": compute, "loop_s": statistics.median(inside), "repetitions": len(inside)}


def rates(got):
    """Per-trial compute and comm rates from the trials' results, in trial order."""
    compute = [p["compute_s"] / b["compute_s"] for p, b in zip(got["pair"], got["pair_loop"])]
    comm = [a["loop_s"] / b["loop_s"] for a, b in zip(got["loop"], got["pair_loop"])]
    training = [p["compute_s"] / r["compute_s"] for p, r in zip(got["pair"], got["ranks2"])]
    return compute, comm, training


def row(place, framework, model, library, args, got):
    compute, comm, training = rates(got)
    cores = statistics.median(t["cores"] for t in got["loop"])
    cpus = place.node_cpus()
    commit = subprocess.run(["git", "-C", str(ROOT), "rev-parse", "--short", "HEAD"], capture_output=True, text=True)
    return {
        "framework": framework,
        "model": model,
        "allreduce_library": library,
        "place": place.describe(),
        "bytes": args.bytes,
        "compute_rate": round(statistics.median(compute), 4),
        "compute_rate_min": round(min(compute), 4),
        "compute_rate_max": round(max(compute), 4),
        "comm_rate": round(statistics.median(comm), 4),
        "comm_rate_min": round(min(comm), 4),
        "comm_rate_max": round(max(comm), 4),
        "training_rate": round(statistics.median(training), 4),
        "training_rate_min": round(min(training), 4),
        "training_rate_max": round(max(training), 4),
        "rule_rate": round(shared_rate(1, place.ranks_per_node(), cpus, cores), 4),
        "loop_cores": round(cores, 3),
        "pair_compute_s": round(statistics.median(t["compute_s"] for t in got["pair"]), 5),
        "loop_alone_s": round(statistics.median(t["loop_s"] for t in got["loop"]), 5),
        "beside_repetitions": min(t["repetitions"] for t in got["pair_loop"]),
        "trials": args.trials,
        "batch_size": args.batch_size,
        "image_size": args.image_size,
        "iterations": args.iterations,
        "node_cpus": cpus,
        "machine": machine(),
        "date": datetime.date.today().isoformat(),
        "commit": commit.stdout.strip(),
        "note": args.note,
    }


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--framework", nargs="+", default=["torch", "tensorflow", "jax"])
    ap.add_argument("--model", nargs="+", default=["resnet50", "alexnet"])
    ap.add_argument("--bytes", type=int, default=64 << 20)
    ap.add_argument("--batch-size", type=int, default=8)
    ap.add_argument("--image-size", type=int, default=64)
    ap.add_argument("--warmup", type=int, default=2)
    ap.add_argument("--iterations", type=int, default=20)
    ap.add_argument("--trials", type=int, default=3)
    ap.add_argument("--loop-s", type=float, default=8.0)
    ap.add_argument("--note", default="")
    ap.add_argument("--out", default=str(ROOT / "bench" / "results" / "sharing.csv"))
    ap.add_argument("--emulated", type=float, metavar="MBIT", help="on two emulated nodes at this link rate (root)")
    args = ap.parse_args(argv)
    if args.emulated is None:
        measure(Place(), args)
    else:
        with emulate.cluster(2, rate_mbit=args.emulated) as cluster:
            measure(Place(cluster), args)
    return 0


def measure(place, args):
    """A row per framework and model, each from its trials at `place`, added to the table as it is made (a
    later configuration that fails keeps the rows before it)."""
    env = study_rank_env(1)
    with tempfile.TemporaryDirectory() as tmp:
        for framework in args.framework:
            library = frameworks.default_library(framework)
            for model in args.model:
                spec = harness_spec(args, framework=framework, allreduce_library=library, model=model)
                spec.update(timing="phased", threads_per_rank=1)
                got = {k: [] for k in KINDS}
                for t in range(args.trials):
                    for kind in KINDS[t % len(KINDS) :] + KINDS[: t % len(KINDS)]:
                        out = Path(tmp) / f"{framework}_{model}_{t}_{kind}"
                        got[kind].append(trial(place, kind, spec, args.bytes, out, env, args.loop_s))
                made = row(place, framework, model, library, args, got)
                # rows from before the place column were all measured on one node
                append_table([made], args.out, COLUMNS, upgrade=lambda r: {**r, "place": r.get("place") or "one node"})
                say(made)


def say(r):
    print(
        f"{r['framework']} {r['model']} ({r['place']}): compute rate {r['compute_rate']:.3f} "
        f"[{r['compute_rate_min']:.3f}, {r['compute_rate_max']:.3f}], comm rate {r['comm_rate']:.3f} "
        f"[{r['comm_rate_min']:.3f}, {r['comm_rate_max']:.3f}], training {r['training_rate']:.3f} "
        f"[{r['training_rate_min']:.3f}, {r['training_rate_max']:.3f}]; the rule's {r['rule_rate']:.3f} "
        f"({r['loop_cores']:.2f} cores)",
        flush=True,
    )


if __name__ == "__main__":
    sys.exit(main())
