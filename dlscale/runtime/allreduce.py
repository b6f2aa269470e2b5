"""Allreduce sweep, under mpirun: `python -m dlscale.runtime.allreduce OUT.jsonl [--max-bytes N] [--device gpu]
[--native a,b] [--instrument FRAMEWORK|none] [--no-reference] [--binding FRAMEWORK] [--threads N]`.

Every rank allreduces float32 buffers of 4 bytes to `--max-bytes` (256 MiB; x4 a step), each repetition after a
barrier; rank 0 writes a JSON line per size and path with the slowest rank's times. Paths: `mpi`;
`horovod` (FUSED_PIECES tensors through `--instrument`'s binding, with the wait for Horovod's cycle),
`horovod_tensors` (MANY_PIECES) and `horovod_one` (one tensor, no fusion buffer); each `--native`
framework's own library's; `--binding`'s Horovod paths. `--device gpu`: the horovod path alone, on the GPU.
"""

import dataclasses
import functools
import json
import math
import statistics
import sys
import time

import numpy as np

from dlscale.core.ring import (
    FUSED_PIECES,
    MANY_PIECES,
    ONE_MIN_BYTES,
    ONE_SUFFIX,
    PER_TENSOR_MAX_BYTES,
    SCHEMA,
    TENSORS_SUFFIX,
)
from dlscale.workloads import frameworks, rendezvous
from dlscale.workloads.frameworks import binding_path

MIB = 1 << 20
PATHS = ("mpi", "horovod", "horovod_tensors", f"horovod{ONE_SUFFIX}")


class SweepError(RuntimeError):
    pass


def sizes(max_bytes=256 * MIB, min_bytes=4, factor=4):
    out, size = [], min_bytes
    while size <= max_bytes:
        out.append(size)
        size *= factor
    if out[-1] != max_bytes:
        out.append(max_bytes)
    return out


def enough(times, budget_s=2.0, least=5, most=50):
    """At least `least` repetitions, then until `budget_s` of allreduce time or `most`. Every rank decides
    from the same (slowest rank's) times, so all stop together."""
    return len(times) >= most or (len(times) >= least and sum(times) >= budget_s)


def host_allreduce(comm):
    """MPI allreduce of host buffers: for a size, a callable that runs one and returns element 0."""
    from mpi4py import MPI

    def prepare(nbytes):
        send = np.ones(nbytes // 4, dtype=np.float32)
        recv = np.empty_like(send)

        def run():
            comm.Allreduce(send, recv, op=MPI.SUM)
            return recv[0]

        return run

    return prepare, "mpi (host memory)"


def horovod_allreduce(comm, instrument, tensors=FUSED_PIECES, threads=None):
    """Horovod's averaging allreduce of `tensors` host tensors submitted together, through `instrument`'s
    binding at `threads` compute threads (its default takes every core): as host_allreduce."""
    binding = frameworks.module(instrument, "instrument")
    binding.start(comm, threads=threads)

    def prepare(nbytes):
        count = nbytes // 4
        pieces = min(tensors, count)
        bufs = [binding.ones(n) for n in [count // pieces] * (pieces - 1) + [count - count // pieces * (pieces - 1)]]

        def run():
            names = [f"sweep.{tensors}x.{nbytes}.{i}" for i in range(len(bufs))]
            return binding.first(binding.wait(binding.submit(bufs, names))[0])

        return run

    label = frameworks.get(instrument).LABEL
    shape = "1 tensor, no fusion buffer" if tensors == 1 else f"{tensors} tensors fused"
    return prepare, f"horovod mpi (host memory, {shape}, {label}'s binding)"


def gpu_allreduce(comm, instrument):
    """Horovod's allreduce of CUDA tensors on the local rank's GPU (PyTorch's binding alone has it)."""
    binding = frameworks.module(instrument, "instrument")
    if not hasattr(binding, "on_gpu"):
        raise SweepError(f"allreduce sweep on device gpu: {frameworks.get(instrument).LABEL}'s binding has no GPU path")
    try:
        return binding.on_gpu(comm)
    except binding.NoDevice as e:
        raise SweepError(str(e)) from None


def _own_paths(native):
    """(path, maker, tensors per message) of the `native` frameworks' own libraries' `sweep` paths."""
    own = [frameworks.module(name, "sweep") for name in frameworks.with_part("sweep") if name in native]
    return [(f"{m.PATH}{suffix}", m.allreduce, pieces) for m in own for suffix, pieces in OWN_MESSAGES]


OWN_MESSAGES = (("", FUSED_PIECES), (TENSORS_SUFFIX, MANY_PIECES))


@dataclasses.dataclass(frozen=True)
class Options:
    """What a sweep job times (its command line, `parse`)."""

    max_bytes: int = 256 * MIB
    device: str = "cpu"
    native: tuple = ()  # the frameworks whose own library's paths it times
    instrument: str | None = frameworks.REFERENCE  # whose binding the horovod paths go through (None: none)
    reference: bool = True  # the mpi and horovod paths (else only `native`'s and `binding`'s)
    binding: str | None = None  # another framework whose binding's Horovod paths it times
    threads: int | None = None  # the compute threads of the study's ranks, which a binding's framework keeps

    @classmethod
    def parse(cls, argv):
        value = {a.removeprefix("--").replace("-", "_"): v for a, v in zip(argv, argv[1:]) if a.startswith("--")}
        return cls(
            max_bytes=int(value.get("max_bytes", 256 * MIB)),
            device=value.get("device", "cpu"),
            native=tuple(fw for fw in value.get("native", "").split(",") if fw),
            instrument=None if value.get("instrument") == "none" else value.get("instrument", frameworks.REFERENCE),
            reference="--no-reference" not in argv,
            binding=value.get("binding"),
            threads=int(value["threads"]) if "threads" in value else None,
        )


def _paths(opts, n):
    """(path, maker, expected element 0, sizes) of every path a sweep of Options `opts` runs on `n` ranks."""
    if opts.device == "gpu":
        return [("horovod", functools.partial(gpu_allreduce, instrument=opts.instrument), n, sizes(opts.max_bytes))]
    references = [("mpi", host_allreduce, n, sizes(opts.max_bytes))] + (
        horovod_paths(opts.instrument, opts.max_bytes, threads=opts.threads) if opts.instrument else []
    )
    few = _few(opts.max_bytes)
    own = [
        (path, functools.partial(make, tensors=pieces), 1, sizes(opts.max_bytes) if pieces == FUSED_PIECES else few)
        for path, make, pieces in _own_paths(opts.native)
    ]
    # another framework's binding, in its own environment
    binding = opts.binding and horovod_paths(opts.binding, opts.max_bytes, binding_path(opts.binding), opts.threads)
    return references * opts.reference + own + (binding or [])


def _few(max_bytes):
    """The sizes a many-tensor message is swept at."""
    return [m for m in sizes(max_bytes) if MANY_PIECES * 4 <= m <= PER_TENSOR_MAX_BYTES]


def horovod_paths(binding, max_bytes, name="horovod", threads=None):
    """The Horovod paths `name`, `name`_tensors and `name`_one through `binding`'s binding."""
    large = [m for m in sizes(max_bytes) if m >= min(ONE_MIN_BYTES, max_bytes)]  # a shrunk sweep: its largest
    hvd = functools.partial(horovod_allreduce, instrument=binding, threads=threads)
    return [
        (name, hvd, 1, sizes(max_bytes)),
        (f"{name}{TENSORS_SUFFIX}", functools.partial(hvd, tensors=MANY_PIECES), 1, _few(max_bytes)),
        (f"{name}{ONE_SUFFIX}", functools.partial(hvd, tensors=1), 1, large),
    ]


def _repeated(comm, run):
    """The slowest rank's time of each repetition (after two warm-ups), the last result, and the mean over
    ranks of process CPU time (every thread's) over wall time: an allreduce on a CPU computes (copies, sums,
    polls), and the cores it takes are what a rank's compute beside it loses."""
    from mpi4py import MPI

    times, warmup, cpu, wall = [], 2, 0.0, 0.0
    while not enough(times):
        comm.Barrier()
        start, cpu_start = time.perf_counter(), time.process_time()
        result = run()
        mine, cpu_used = time.perf_counter() - start, time.process_time() - cpu_start
        elapsed = comm.allreduce(mine, op=MPI.MAX)
        if warmup:
            warmup -= 1
        else:
            times.append(elapsed)
            cpu, wall = cpu + cpu_used, wall + mine
    cores = comm.allreduce(cpu / wall if wall > 0 else math.nan, op=MPI.SUM) / comm.Get_size()
    return times, result, cores


def main(argv=None):
    from mpi4py import MPI

    argv = sys.argv[1:] if argv is None else argv
    out, opts = argv[0], Options.parse(argv[1:])
    comm = MPI.COMM_WORLD
    rank, n = comm.Get_rank(), comm.Get_size()
    fh = open(out, "w") if rank == 0 else None
    paths = _paths(opts, n)
    for path, make, expected, swept in paths:
        allreduce, transport = make(comm)
        for nbytes in swept:
            times, result, cores = _repeated(comm, allreduce(nbytes))
            if result != expected:
                raise SweepError(f"{path} allreduce of {nbytes} bytes gave {result}, expected {expected}")
            if fh:
                row = {"schema": SCHEMA, "path": path, "bytes": nbytes, "ranks": n, "host": MPI.Get_processor_name()}
                row |= {"mpi": MPI.Get_library_version().splitlines()[0], "transport": transport, "times_s": times}
                row |= {"median_s": statistics.median(times), "cores_used": cores}
                fh.write(json.dumps(row) + "\n")
                fh.flush()
    if fh:
        fh.close()


if __name__ == "__main__":
    main()
    rendezvous.end()
