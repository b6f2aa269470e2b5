"""One rank of a training run: `python -m workloads.train SPEC.json` (started by mpirun).

The loop is the same for every framework; a framework supplies a Trainer with one method per SGD
phase and a `sync()` that waits for its device and engine. Each phase is timed between two syncs,
so a phase's time is the work it launched, not work queued by an earlier one. Every iteration,
warm-up included (flagged), becomes one record line in ``rank<R>.jsonl`` in the run folder.

The run record also holds the gradients' sizes (for the performance model). Where the framework
reports when each gradient is complete (PyTorch's backward hooks), the end record holds the median
time of each, in seconds from the start of backward (`gradient_ready_s`). With more than one rank
and HOROVOD_TIMELINE=DYNAMIC (set by the launcher), rank 0 records Horovod's timeline of the
measured iterations only, in ``timeline.json``.
"""

import importlib
import json
import math
import os
import platform
import socket
import sys
import time
from pathlib import Path

import numpy as np

from harness.records import IDENTITY, Writer

TRAINERS = {"torch": "workloads.torch_trainer", "tensorflow": "workloads.tf_trainer",
            "mxnet": "workloads.mx_trainer"}
POOL = 4  # distinct synthetic batches per rank, used in turn
TIMELINE = "timeline.json"


class SyntheticData:
    """Per-rank synthetic images and labels from numpy, identical for every framework.

    Batch k of rank r comes from the generator seeded with (seed, r, k); iteration i uses batch
    i mod POOL. Images are NCHW float32 standard normal, labels uniform over the classes. The pool is
    made before timing starts, in the framework's layout (NHWC is the same values transposed); the io
    phase then copies the iteration's batch into the framework's host staging buffer, the h2d phase
    moves it to the device.
    """

    def __init__(self, seed, rank, batch_size, image_size, classes, layout="NCHW", pool=POOL):
        self.batches = []
        for k in range(pool):
            rng = np.random.default_rng([seed, rank, k])
            x = rng.standard_normal((batch_size, 3, image_size, image_size), dtype=np.float32)
            y = rng.integers(0, classes, size=batch_size, dtype=np.int64)
            if layout == "NHWC":
                x = np.ascontiguousarray(x.transpose(0, 2, 3, 1))
            self.batches.append((x, y))

    def __call__(self, iteration):
        return self.batches[iteration % len(self.batches)]


def load_trainer(spec):
    framework = spec["framework"]
    if framework not in TRAINERS:
        raise SystemExit(f"unknown framework {framework!r}; known: {', '.join(TRAINERS)}")
    return importlib.import_module(TRAINERS[framework]).Trainer(spec)


def timed_step(trainer, batch):
    """Run one SGD iteration; return (phase seconds, start time, loss handle)."""
    now = time.perf_counter
    start = now()
    host = trainer.load(batch)
    trainer.sync()
    t_io = now()
    dev = trainer.h2d(host)
    trainer.sync()
    t_h2d = now()
    loss = trainer.forward(dev)
    trainer.sync()
    t_fwd = now()
    trainer.backward(loss)
    trainer.sync()
    t_bwd = now()
    trainer.comm()
    trainer.sync()
    t_comm = now()
    trainer.update()
    trainer.sync()
    end = now()
    phases = {
        "io_s": t_io - start, "h2d_s": t_h2d - t_io, "forward_s": t_fwd - t_h2d,
        "backward_s": t_bwd - t_fwd, "comm_s": t_comm - t_bwd, "update_s": end - t_comm,
    }
    return phases, start, loss


def provenance(trainer, spec):
    env_keys = sorted(k for k in os.environ if k.startswith(("OMP_", "MKL_", "HOROVOD_", "TF_", "MXNET_", "DLSCALE_",
                                                              "NCCL_", "UCX_",
                                                              "OMPI_COMM_WORLD_SIZE", "CUDA_VISIBLE")))
    return {
        "python": platform.python_version(),
        "platform": platform.platform(),
        "argv": sys.argv,
        "pid": os.getpid(),
        "environ": {k: os.environ[k] for k in env_keys},
        "framework": trainer.describe(),
        "launch": spec.get("launch", {}),
    }


def main(argv=None):
    argv = sys.argv[1:] if argv is None else argv
    spec = json.loads(Path(argv[0]).read_text())
    trainer = load_trainer(spec)
    out = Path(spec["out_dir"])
    writer = Writer(out / f"rank{trainer.rank}.jsonl")
    sizes = trainer.gradient_sizes()
    writer.write(
        "run", **{k: spec[k] for k in IDENTITY}, rank=trainer.rank, size=trainer.size,
        local_rank=trainer.local_rank, host=os.environ.get("DLSCALE_NODE") or socket.gethostname(),
        gradients={"tensors": len(sizes), "bytes": sum(sizes), "sizes": sizes},
        provenance=provenance(trainer, spec),
    )
    data = SyntheticData(spec["seed"], trainer.rank, spec["batch_size"], spec["image_size"], spec["classes"],
                         trainer.layout)
    warmup, total = spec["warmup"], spec["warmup"] + spec["iterations"]
    # Horovod's timeline (written by rank 0) covers the measured iterations only.
    timeline = trainer.size > 1 and os.environ.get("HOROVOD_TIMELINE") == "DYNAMIC"
    ready = []
    started = time.perf_counter()
    for it in range(total):
        if timeline and it == warmup:
            trainer.hvd.start_timeline(str(out / TIMELINE))
        phases, start, loss = timed_step(trainer, data(it))
        if it >= warmup and hasattr(trainer, "gradient_ready"):
            ready.append(trainer.gradient_ready())
        loss = trainer.loss_value(loss)
        # The iteration's wall time is taken apart from the phases and includes the loop's own
        # work (loss read-back), so that phases summing to it shows the timing misses nothing.
        wall = time.perf_counter() - start
        writer.write("step", rank=trainer.rank, iteration=it, warmup=it < warmup, **phases, wall_s=wall,
                     loss=loss if math.isfinite(loss) else str(loss))
    if timeline:
        trainer.hvd.stop_timeline()
    extra = {"gradient_ready_s": np.median(ready, axis=0).tolist()} if ready else {}
    writer.write("end", rank=trainer.rank, iterations=total, checksum=trainer.checksum(),
                 elapsed_s=time.perf_counter() - started, **extra)
    writer.close()
    trainer.shutdown()


if __name__ == "__main__":
    main()
