"""Allreduce sweeps -> one row per (nodes, ranks_per_node, bytes), and the ring model's fit.

allreduce.csv: median and minimum time per size, algorithm and bus bandwidth (nccl-tests
definitions, from the median) and the transport measured (MPI on host memory, or Horovod's NCCL
on GPU memory in a GPU study). allreduce_fit.csv: per (nodes, ranks_per_node) the fitted alpha
(latency, s), beta (s/byte) and the bandwidth 1/beta, with the fit's median |relative error|; a
sweep that failed is a row with its reason.
"""

import json
from pathlib import Path

import pandas as pd

from harness import allreduce

SWEEP_COLUMNS = ["nodes", "ranks_per_node", "ranks", "bytes", "median_s", "min_s", "algbw_bytes_per_s",
                 "busbw_bytes_per_s", "transport"]
FIT_COLUMNS = ["nodes", "ranks_per_node", "ranks", "alpha_s", "beta_s_per_byte", "bandwidth_bytes_per_s",
               "fit_median_rel_error", "sizes", "failure"]


def read_sweep(path, nodes, ranks_per_node):
    rows, failure = [], ""
    for number, line in enumerate(Path(path).read_text().splitlines(), start=1):
        rec = json.loads(line)
        if rec.get("schema") != allreduce.SCHEMA:
            raise ValueError(f"{path}:{number}: schema is {rec.get('schema')!r}, expected {allreduce.SCHEMA!r}")
        if "failed" in rec:
            failure = "; ".join(x for x in (rec["failed"], rec.get("error")) if x)
            continue
        algbw = rec["bytes"] / rec["median_s"]
        rows.append({"nodes": nodes, "ranks_per_node": ranks_per_node, "ranks": rec["ranks"],
                     "bytes": rec["bytes"], "median_s": rec["median_s"], "min_s": min(rec["times_s"]),
                     "algbw_bytes_per_s": algbw, "busbw_bytes_per_s": allreduce.bus_bandwidth(algbw, rec["ranks"]),
                     "transport": rec.get("transport", "mpi (host memory)")})
    return rows, failure


def tables(sweeps):
    """sweeps: [(path, nodes, ranks_per_node)] -> (sweep table, fit table)."""
    all_rows, fits = [], []
    for path, nodes, rpn in sweeps:
        rows, failure = read_sweep(path, nodes, rpn)
        all_rows += rows
        fit = {"nodes": nodes, "ranks_per_node": rpn, "ranks": nodes * rpn, "sizes": len(rows), "failure": failure}
        if rows and not failure:
            alpha, beta, err = allreduce.fit_ring([r["bytes"] for r in rows], [r["median_s"] for r in rows],
                                                  nodes * rpn)
            fit.update(alpha_s=alpha, beta_s_per_byte=beta, fit_median_rel_error=err,
                       bandwidth_bytes_per_s=1 / beta if beta > 0 else float("inf"))
        fits.append(fit)
    return pd.DataFrame(all_rows, columns=SWEEP_COLUMNS), pd.DataFrame(fits, columns=FIT_COLUMNS)
