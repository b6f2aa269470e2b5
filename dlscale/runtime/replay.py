"""Replay: a study's gradient traffic on more nodes than it ran on, without its compute.

`python -m dlscale.runtime.replay OUT.jsonl SPEC.json` under mpirun: per plan (a 1-rank configuration's
phase times, gradient sizes and ready times) every rank's iterations sleep io + h2d + forward, submit each
gradient's real Horovod allreduce at its ready time, sleep to backward's end, wait for them, sleep update.
Rank 0 writes a JSON line per measured iteration: every rank's iteration time and exposed communication.
"""

import itertools
import json
import sys
import time

from dlscale.core.vocabulary import BACKWARD_S, BASELINE_KEYS, FORWARD_S, H2D_S, IO_S, UPDATE_S
from dlscale.workloads import frameworks

SCHEMA = "dlscale.replay/1"
PHASES_BEFORE = (IO_S, H2D_S, FORWARD_S)


class ReplayError(ValueError):
    pass


def plans(bases, models, schedules=None):
    """Plans of the listed models (and schedules) from the 1-rank baselines ({MATCH key: details})."""
    out = []
    for key, b in sorted(bases.items(), key=lambda kv: tuple(map(str, kv[0]))):
        ident = dict(zip(BASELINE_KEYS, key))
        if ident["model"] not in models or (schedules and ident["allreduce_schedule"] not in schedules):
            continue
        if ident["allreduce_library"] != frameworks.HOROVOD:  # replayed through Horovod only
            continue
        ready = None if ident["allreduce_schedule"] == "sequential" else b["ready"]
        out.append(
            {
                "key": {k: (v.item() if hasattr(v, "item") else v) for k, v in ident.items()},
                "phases": {k: float(v) for k, v in b["base"].items()},
                "sizes": [int(m) for m in b["sizes"]],
                "ready": None if ready is None else [float(r) for r in ready],
                "threshold": int(b["threshold"]),
                "cycle": float(b["cycle"]),
            }
        )
    return out


def check_plan(plan):
    sizes, ready = plan["sizes"], plan["ready"]
    if not sizes or any(m <= 0 or m % 4 for m in sizes):
        raise ReplayError(f"replay plan {plan['key']}: gradient sizes must be positive multiples of 4 bytes")
    if ready is not None and len(ready) != len(sizes):
        raise ReplayError(f"replay plan {plan['key']}: {len(ready)} ready times for {len(sizes)} gradients")
    if any(plan["phases"].get(k, -1) < 0 for k in PHASES_BEFORE + (BACKWARD_S, UPDATE_S)):
        raise ReplayError(f"replay plan {plan['key']}: phase times missing or negative: {plan['phases']}")


def _sleep_until(deadline):
    left = deadline - time.perf_counter()
    if left > 0:
        time.sleep(left)


def replay(plan, binding, iterations, warmup):
    """This rank's (iteration s, exposed communication s) per measured iteration of one plan, through
    `binding`. Gradients ready at once are handed over together, as a step does (TensorFlow's, in one
    traced function: one call per gradient took the replay 16% over the model on 4 emulated nodes)."""
    phases, sizes = plan["phases"], plan["sizes"]
    backward = phases[BACKWARD_S]
    ready = [backward] * len(sizes) if plan["ready"] is None else [min(r, backward) for r in plan["ready"]]
    order = sorted(range(len(sizes)), key=lambda i: ready[i])
    together = [(at, list(group)) for at, group in itertools.groupby(order, key=lambda i: ready[i])]
    grads = [binding.ones(m // 4) for m in sizes]
    out, reduced = [], []
    for it in range(warmup + iterations):
        start = time.perf_counter()
        _sleep_until(start + sum(phases[k] for k in PHASES_BEFORE))
        backward_start = time.perf_counter()
        handles = []
        for at, group in together:
            _sleep_until(backward_start + at)
            handles.append(binding.submit([grads[i] for i in group], [f"grad.{i}" for i in group]))
        _sleep_until(backward_start + backward)
        backward_end = time.perf_counter()
        reduced = [tensor for handle in handles for tensor in binding.wait(handle)]
        comm_end = time.perf_counter()
        _sleep_until(comm_end + phases[UPDATE_S])
        if it >= warmup:
            out.append((time.perf_counter() - start, comm_end - backward_end))
    if any(binding.first(g) != 1.0 for g in reduced):
        raise ReplayError(f"replay plan {plan['key']}: an averaged gradient of ones is not one")
    return out


def main(argv=None):
    from mpi4py import MPI

    argv = sys.argv[1:] if argv is None else argv
    spec = json.loads(open(argv[1]).read())
    comm = MPI.COMM_WORLD
    binding = frameworks.module(spec["instrument"], "instrument")
    hvd = binding.start(comm, threads=1)
    fh = open(argv[0], "w") if hvd.rank() == 0 else None
    for plan in spec["plans"]:
        check_plan(plan)
        mine = replay(plan, binding, spec["iterations"], spec["warmup"])
        every = comm.gather(mine, root=0)
        if fh:
            for i in range(len(mine)):
                row = {"schema": SCHEMA, **plan["key"], "ranks": hvd.size(), "iteration": i}
                row |= {"iteration_s": [r[i][0] for r in every], "exposed_s": [r[i][1] for r in every]}
                fh.write(json.dumps(row) + "\n")
            fh.flush()
    if fh:
        fh.close()


if __name__ == "__main__":
    main()
