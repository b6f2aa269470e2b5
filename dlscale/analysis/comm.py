"""Allreduce sweeps -> allreduce.csv (bandwidths as nccl-tests defines them) and allreduce_fit.csv (ring fits)."""

import json
import math
import statistics
from pathlib import Path

import pandas as pd

from dlscale.core import ring

_PLACE = ["nodes", "ranks_per_node", "ranks", "path"]
SWEEP_COLUMNS = _PLACE + ["bytes", "repetitions", "median_s", "min_s", "max_s"]
SWEEP_COLUMNS += ["algbw_bytes_per_s", "busbw_bytes_per_s", "transport", "cores_used"]
FIT_COLUMNS = _PLACE + ["alpha_s", "beta_s_per_byte", "bandwidth_bytes_per_s", "fit_median_rel_error"]
FIT_COLUMNS += ["per_tensor_s", "sizes", "failure"]


def read_sweep(path, nodes, ranks_per_node):
    rows, failure = [], ""
    for number, line in enumerate(Path(path).read_text().splitlines(), start=1):
        rec = json.loads(line)
        if rec.get("schema") != ring.SCHEMA:
            raise ValueError(f"{path}:{number}: schema is {rec.get('schema')!r}, expected {ring.SCHEMA!r}")
        if "failed" in rec:
            failure = "; ".join(x for x in (rec["failed"], rec.get("error")) if x)
            continue
        algbw = rec["bytes"] / rec["median_s"]
        transport = rec.get("transport", "mpi (host memory)")
        rows.append(
            {
                "nodes": nodes,
                "ranks_per_node": ranks_per_node,
                "ranks": rec["ranks"],
                # sweeps before the horovod path: one path, named by its transport
                "path": rec.get("path", "horovod" if transport.startswith("horovod") else "mpi"),
                "bytes": rec["bytes"],
                "repetitions": len(rec["times_s"]),
                "median_s": rec["median_s"],
                "min_s": min(rec["times_s"]),
                "max_s": max(rec["times_s"]),
                "algbw_bytes_per_s": algbw,
                "busbw_bytes_per_s": ring.bus_bandwidth(algbw, rec["ranks"]),
                "transport": transport,
                "cores_used": rec.get("cores_used", math.nan),
            }
        )
    return rows, failure


def tables(sweeps):
    """sweeps: [(path, nodes, ranks_per_node)] -> (sweep table, fit table)."""
    all_rows, fits = [], []
    for file, nodes, rpn in sweeps:
        rows, failure = read_sweep(file, nodes, rpn)
        all_rows += rows
        for path in sorted({r["path"] for r in rows}) or [""]:
            mine = [r for r in rows if r["path"] == path]
            fit = dict(nodes=nodes, ranks_per_node=rpn, ranks=nodes * rpn, path=path, sizes=len(mine), failure=failure)
            if len(mine) >= 2 and not failure and nodes * rpn > 1:  # two unknowns: two sizes at least
                alpha, beta, err = ring.fit_ring([r["bytes"] for r in mine], [r["median_s"] for r in mine], nodes * rpn)
                fit.update(alpha_s=alpha, beta_s_per_byte=beta, fit_median_rel_error=err)
                fit["bandwidth_bytes_per_s"] = 1 / beta if beta > 0 else float("inf")
            many = [r for r in rows if r["path"] == f"{path}{ring.TENSORS_SUFFIX}"]
            if many:  # horovod against horovod_tensors; a framework's own library likewise (jax, jax_tensors)
                fit["per_tensor_s"] = per_tensor(mine, many)
            fits.append(fit)
    return pd.DataFrame(all_rows, columns=SWEEP_COLUMNS), pd.DataFrame(fits, columns=FIT_COLUMNS)


def per_tensor(fused, many):
    """Seconds each tensor of a message adds: the median over sizes both paths swept (NaN with none)."""
    few, pieces = {r["bytes"]: r["median_s"] for r in fused}, ring.MANY_PIECES - ring.FUSED_PIECES
    extra = [(r["median_s"] - few[r["bytes"]]) / pieces for r in many if r["bytes"] in few]
    return statistics.median(extra) if extra else float("nan")
