"""Allreduce sweep (run under mpirun with mpi4py) and its analysis.

`python -m harness.allreduce OUT.jsonl [--max-bytes N]`: every rank allreduces float32 buffers of
4 bytes to `--max-bytes` (default 256 MiB, doubling by 4x), each size repeated after a barrier;
rank 0 writes one JSON line per size with the slowest rank's time of each repetition.

Bandwidths follow nccl-tests: algorithm bandwidth = bytes / time; bus bandwidth for allreduce =
algbw x 2(n-1)/n. The latency-bandwidth (alpha-beta) model of ring allreduce on n ranks,
T(m) = 2(n-1) alpha + 2(n-1)/n m beta, is fitted by least squares on relative error (so small and
large messages weigh alike); its fit error is the median absolute relative error over sizes.
"""

import json
import statistics
import sys
import time

import numpy as np

SCHEMA = "dlscale.allreduce/1"
MIB = 1 << 20


def sizes(max_bytes=256 * MIB, min_bytes=4, factor=4):
    out, size = [], min_bytes
    while size <= max_bytes:
        out.append(size)
        size *= factor
    if out[-1] != max_bytes:
        out.append(max_bytes)
    return out


def repetitions(nbytes, budget_bytes=512 * MIB, most=50, least=3):
    """Fewer repetitions for large messages: about `budget_bytes` of traffic per size."""
    return int(min(most, max(least, budget_bytes // max(nbytes, 1))))


def bus_bandwidth(algbw, ranks):
    return algbw * 2 * (ranks - 1) / ranks


def ring_time(nbytes, ranks, alpha_s, beta_s_per_byte):
    return 2 * (ranks - 1) * alpha_s + 2 * (ranks - 1) / ranks * nbytes * beta_s_per_byte


def fit_ring(nbytes, times, ranks):
    """Least-squares alpha (s) and beta (s/byte) of the ring model, and the median |rel. error|."""
    if ranks < 2:
        raise ValueError("the ring model needs at least 2 ranks")
    m, t = np.asarray(nbytes, float), np.asarray(times, float)
    design = np.column_stack([np.full_like(m, 2 * (ranks - 1)), 2 * (ranks - 1) / ranks * m]) / t[:, None]
    (alpha, beta), *_ = np.linalg.lstsq(design, np.ones_like(t), rcond=None)
    pred = ring_time(m, ranks, alpha, beta)
    return float(alpha), float(beta), float(np.median(np.abs(pred - t) / t))


def main(argv=None):
    from mpi4py import MPI

    argv = sys.argv[1:] if argv is None else argv
    out = argv[0]
    max_bytes = int(argv[argv.index("--max-bytes") + 1]) if "--max-bytes" in argv else 256 * MIB
    comm = MPI.COMM_WORLD
    rank, n = comm.Get_rank(), comm.Get_size()
    fh = open(out, "w") if rank == 0 else None
    for nbytes in sizes(max_bytes):
        send = np.ones(nbytes // 4, dtype=np.float32)
        recv = np.empty_like(send)
        reps = repetitions(nbytes)
        times = []
        for i in range(reps + 2):  # two warm-up repetitions
            comm.Barrier()
            start = time.perf_counter()
            comm.Allreduce(send, recv, op=MPI.SUM)
            elapsed = comm.allreduce(time.perf_counter() - start, op=MPI.MAX)
            if i >= 2:
                times.append(elapsed)
        if recv[0] != n:
            raise SystemExit(f"allreduce of {nbytes} bytes gave {recv[0]}, expected {n}")
        if fh:
            fh.write(json.dumps({"schema": SCHEMA, "bytes": nbytes, "ranks": n, "host": MPI.Get_processor_name(),
                                 "mpi": MPI.Get_library_version().splitlines()[0], "times_s": times,
                                 "median_s": statistics.median(times)}) + "\n")
            fh.flush()
    if fh:
        fh.close()


if __name__ == "__main__":
    main()
