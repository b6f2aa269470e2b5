"""Under mpirun, for bench/sharing.py (not a test): one allreduce of BYTES through FRAMEWORK's default
library (its Horovod binding, or its own collectives), repeated as the allreduce sweep repeats it (a
barrier, the allreduce, the slowest rank's time) until the file STOP exists; READY is made once it is
warm. Rank 0 writes a JSON line per repetition: when it started (unix s), the slowest rank's seconds.

  mpirun -np 2 PYTHON bench/allreduce_loop.py OUT.jsonl FRAMEWORK BYTES READY STOP
"""

import json
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from dlscale.core.ring import FUSED_PIECES  # noqa: E402
from dlscale.runtime.allreduce import horovod_allreduce  # noqa: E402
from dlscale.workloads import frameworks, rendezvous  # noqa: E402

WARMUP = 3


def maker(comm, framework):
    """The allreduce a study's run of `framework` makes (its default library), at one compute thread."""
    if frameworks.default_library(framework) == frameworks.HOROVOD:
        return horovod_allreduce(comm, framework, threads=1)[0]
    return frameworks.module(framework, "sweep").allreduce(comm, tensors=FUSED_PIECES)[0]


def main(argv):
    from mpi4py import MPI

    out, framework, nbytes, ready, stop = argv[0], argv[1], int(argv[2]), Path(argv[3]), Path(argv[4])
    comm = MPI.COMM_WORLD
    rank = comm.Get_rank()
    run = maker(comm, framework)(nbytes)
    for _ in range(WARMUP):
        comm.Barrier()
        run()
    fh = open(out, "w") if rank == 0 else None
    if fh:
        ready.touch()
    while not comm.bcast(stop.exists() if rank == 0 else None):
        comm.Barrier()
        started, begin, cpu = time.time(), time.perf_counter(), time.process_time()
        run()
        mine, cpu_used = time.perf_counter() - begin, time.process_time() - cpu
        elapsed = comm.allreduce(mine, op=MPI.MAX)
        cores = comm.allreduce(cpu_used / mine if mine > 0 else 0.0, op=MPI.SUM) / comm.Get_size()
        if fh:
            fh.write(json.dumps({"unix_s": started, "s": elapsed, "cores": cores}) + "\n")
            fh.flush()
    if fh:
        fh.close()


if __name__ == "__main__":
    main(sys.argv[1:])
    rendezvous.end()
