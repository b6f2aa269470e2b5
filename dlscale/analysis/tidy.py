"""Per-rank records of all runs -> tidy.csv (run x rank x iteration x phase; traced iterations add their
trace's phases), runs.csv (one row per run) and tensors.csv (rank 0's gradient tensors). A run folder whose
files cannot be read is a failed row naming the file and why; the other runs' tables are still made."""

import json
from pathlib import Path

import pandas as pd

from dlscale.analysis import trace
from dlscale.core import hardware, samples, vocabulary
from dlscale.core.paths import run_from_path
from dlscale.core.records import parse_file
from dlscale.core.timeline import timeline_comm
from dlscale.core.vocabulary import PHASES, RUN_KEYS, SPEC, STATUS, TIMELINE, records_name, renamed, seconds, trace_name

TIDY_COLUMNS = RUN_KEYS + ["rank", "host", "iteration", "warmup", "profiled", "source", "phase", "seconds"]
TENSOR_COLUMNS = RUN_KEYS + ["tensor", "bytes", "ready_s"]


def _provenance_row(run_rec):
    prov = run_rec["provenance"]
    data = run_rec.get("data", {})
    fw = prov.get("framework", {})
    launch = prov.get("launch", {})
    return {
        # records before the fixed Description named the version by the framework's word
        "framework_version": fw.get("version") or fw.get(fw.get("name", ""), ""),
        "horovod_version": fw.get("horovod", ""),
        "intra_op_threads": fw.get("intra_op_threads"),
        "inter_op_threads": fw.get("inter_op_threads"),
        "layout_used": fw.get("layout", ""),
        "onednn": fw.get("onednn"),
        "math_build": fw.get("math_build", ""),  # runs recorded before it was asked have none
        "data": data.get("kind", "synthetic"),
        "data_images": data.get("images"),
        "data_skipped": data.get("skipped"),
        "data_hash": data.get("content_hash"),
        "autotune": fw.get("autotune"),
        "tf32": fw.get("tf32"),
        "device": fw.get("device", ""),
        "python_version": prov.get("python", ""),
        "mpi_version": launch.get("mpi", {}).get("version", ""),
        "environment": launch.get("environment", ""),
        "dlscale_commit": launch.get("dlscale", ""),  # runs launched before it was recorded have none
        "hosts": ",".join(launch.get("hosts", [])),
        "link_rate_mbit": (launch.get("emulated") or {}).get("rate_mbit"),
        "link_delay_ms": (launch.get("emulated") or {}).get("delay_ms"),
        "comm_overlaps_backward": fw.get("comm_overlaps_backward"),
        "allreduce_library_used": renamed(fw.get("extra", {})).get("allreduce_library", ""),
        "grad_tensors": run_rec.get("gradients", {}).get("tensors"),
        "grad_bytes": run_rec.get("gradients", {}).get("bytes"),
        **_fusion(prov),
        "command": " ".join(launch.get("argv", [])),
    }


def _fusion(prov):
    """The run's fusion settings: its own library's (a native library's buckets), else Horovod's (environment)."""
    extra, environ = prov.get("framework", {}).get("extra", {}), prov.get("environ", {})
    threshold = environ.get("HOROVOD_FUSION_THRESHOLD", vocabulary.FUSION_THRESHOLD_BYTES)
    cycle = float(environ.get("HOROVOD_CYCLE_TIME", vocabulary.CYCLE_TIME_S * 1e3)) / 1e3
    threshold, cycle = extra.get("fusion_threshold_bytes", threshold), extra.get("cycle_time_s", cycle)
    return {"fusion_threshold_bytes": int(threshold), "cycle_time_s": float(cycle)}


# runs.csv's columns, in every study: a study whose runs all failed before their first record still
# has the provenance columns (empty) that later stages read (grad_bytes, fusion settings, hosts).
RUNS_COLUMNS = RUN_KEYS + ["status", "reasons", "elapsed_s", "run_dir"] + list(_provenance_row({"provenance": {}}))
RUNS_COLUMNS += list(samples.RECORDED) + ["cores_used", "rank_threads", "started", "hardware"]


class RunFilesError(ValueError):
    """A run folder whose files cannot be read as a run's."""


def _identity(status, status_path):
    """The run's identity from its status.json, else its spec.json, else its path (the matrix keys only)."""
    status = renamed(status)
    if all(k in status for k in RUN_KEYS):
        return {k: status[k] for k in RUN_KEYS}
    try:
        spec = renamed(json.loads((Path(status_path).parent / SPEC).read_text()))
    except (OSError, ValueError, AttributeError):  # AttributeError: not a JSON object
        spec = {}
    if all(k in spec for k in RUN_KEYS):
        return {k: spec[k] for k in RUN_KEYS}
    return {k: status.get(k) for k in RUN_KEYS} | run_from_path(Path(status_path).parent)


def read_run(status_path):
    """(status row, tidy rows, tensor rows) of one run folder, whatever state it was left in."""
    run_dir = Path(status_path).parent
    try:
        status = json.loads(Path(status_path).read_text())
        reasons = status["reasons"]
    except (OSError, ValueError, KeyError, TypeError) as exc:
        status, reasons = {}, [f"{STATUS} unreadable: {exc}"]
    row = {
        **_identity(status, status_path),
        "status": status.get("status", "failed"),
        "reasons": "; ".join(reasons),
        "elapsed_s": status.get("elapsed_s"),
        "run_dir": str(run_dir),
        "started": status.get("started", ""),
    }
    if not status:  # unreadable: its row says so, and "failed"
        return row, [], []
    try:
        return row, *_read_files(run_dir, row)
    except RunFilesError as exc:
        row.update(status="failed", reasons="; ".join(filter(None, [row["reasons"], str(exc)])))
        return row, [], []


def _read_files(run_dir, row):
    """(tidy rows, tensor rows) of a run folder, adding its provenance to `row`; RunFilesError: a file unreadable."""
    identity, ok = {k: row[k] for k in RUN_KEYS}, row["status"] == "ok"
    rows, tensors = [], []
    for rank in range(_ranks(run_dir)):
        records = _rank_records(run_dir, rank, ok)
        if records is None:
            continue
        run_rec = next((r for r in records if r["kind"] == "run"), None)
        _add_run_record(row, rank, run_rec)
        if not ok:
            continue
        end_rec = next((r for r in records if r["kind"] == "end"), {})
        _add_cpu(row, end_rec.get("cpu") or {})
        if rank == 0 and run_rec:
            tensors = _tensor_rows(identity, run_rec, end_rec)
            row.update({k: end_rec.get(k) for k in samples.RECORDED})
        if rank == 0 and (run_dir / TIMELINE).exists():
            measured = sum(r["kind"] == "step" and not r["warmup"] and not r.get("profiled") for r in records)
            comm = _readable(TIMELINE, lambda n=measured: timeline_comm(run_dir / TIMELINE, n))
            row["timeline_comm_s"], row["timeline_ops"] = comm
        host = run_rec["host"] if run_rec else ""
        rows += _record_rows(identity, rank, host, records)
        if (run_dir / trace_name(rank)).exists():
            rows += _trace_rows(identity, rank, host, run_dir)
    return rows, tensors


def _ranks(run_dir):
    """The number of ranks in the run folder's spec.json."""
    if not (run_dir / SPEC).is_file():
        raise RunFilesError(f"no {SPEC} in the run folder")
    try:
        spec = json.loads((run_dir / SPEC).read_text())
        return spec["nodes"] * spec["ranks_per_node"]
    except (OSError, ValueError, KeyError, TypeError) as exc:
        raise RunFilesError(f"{SPEC} unreadable: {exc}") from None


def _rank_records(run_dir, rank, ok):
    """A rank's parsed records, or None where a failed run's rank has none; an ok run's missing or bad is an error."""
    path = run_dir / records_name(rank)
    if not path.exists():
        if ok:
            raise RunFilesError(f"rank {rank} has no records ({path.name} is missing)")
        return None
    records, errors = parse_file(path)
    if errors and ok:
        raise RunFilesError(f"{len(errors)} malformed record line(s), first: {errors[0]}")
    return records


def _add_run_record(row, rank, run_rec):
    """Add to `row` a rank's run record: rank 0's provenance, its host's hardware, its loader's rate (failed too)."""
    if rank == 0 and run_rec:
        row.update(_provenance_row(run_rec))
    host = (run_rec or {}).get("provenance", {}).get("hardware")
    if host:  # every host's, by name: a JSON object in one cell
        hosts = json.loads(row.get("hardware") or "{}")
        hosts[host["host"]] = hardware.merged(hosts.get(host["host"]), host)
        row["hardware"] = json.dumps(hosts, sort_keys=True)
    rate = (run_rec or {}).get("data", {}).get("loader_img_per_s")
    if rate is not None:  # the slowest rank's loader bounds the step
        row["loader_img_per_s"] = min(rate, row.get("loader_img_per_s") or rate)


def _add_cpu(row, cpu):
    """The most cores any rank used and the most threads a rank had (one rank breaks a promise)."""
    for column, key in (("cores_used", "cores_used"), ("rank_threads", "threads")):
        if cpu.get(key) is not None:
            row[column] = max(cpu[key], row.get(column) or 0)


def _record_rows(identity, rank, host, records):
    """Tidy rows from a rank's step records: each phase it holds, and the wall time."""
    rows, base = [], {**identity, "rank": rank, "host": host, "source": "records"}
    for rec in (r for r in records if r["kind"] == "step"):
        step = {**base, "iteration": rec["iteration"], "warmup": rec["warmup"], "profiled": rec.get("profiled", False)}
        for phase in [p for p in PHASES if seconds(p) in rec] + ["wall"]:
            rows.append({**step, "phase": phase, "seconds": rec[seconds(phase)]})
    return rows


def _trace_rows(identity, rank, host, run_dir):
    """Tidy rows of the phases derived from a rank's trace, one per traced iteration x phase."""
    derived = _readable(trace_name(rank), lambda: trace.derive(*trace.read(run_dir / trace_name(rank))))
    base = {**identity, "rank": rank, "host": host, "warmup": False, "profiled": True, "source": "trace"}
    return [
        {**base, "iteration": iteration, "phase": phase, "seconds": phases[seconds(phase)]}
        for (_, iteration), phases in sorted(derived.items())
        for phase in PHASES + trace.EXTRA
    ]


def _readable(name, read):
    """read(), or RunFilesError naming the file when its contents are not what they should be."""
    try:
        return read()
    except Exception as exc:  # a corrupt JSON or gzip file fails in many ways; each is named
        raise RunFilesError(f"{name} unreadable: {type(exc).__name__}: {exc}") from None


def _tensor_rows(identity, run_rec, end_rec):
    sizes = run_rec.get("gradients", {}).get("sizes", [])
    overlaps = run_rec["provenance"].get("framework", {}).get("comm_overlaps_backward")
    ready = end_rec.get("gradient_ready_s") if overlaps else None
    if not ready or len(ready) != len(sizes):
        ready = [None] * len(sizes)
    return [{**identity, "tensor": i, "bytes": b, "ready_s": t} for i, (b, t) in enumerate(zip(sizes, ready))]


def build(status_paths):
    """(tidy, runs, tensors) DataFrames from the status.json of every run."""
    status_rows, tidy_rows, tensor_rows = [], [], []
    for row, rows, tensors in map(read_run, status_paths):
        status_rows.append(row)
        tidy_rows += rows
        tensor_rows += tensors
    runs = pd.DataFrame(status_rows)
    runs = runs.reindex(columns=RUNS_COLUMNS + [c for c in runs.columns if c not in RUNS_COLUMNS])
    return (pd.DataFrame(tidy_rows, columns=TIDY_COLUMNS), runs, pd.DataFrame(tensor_rows, columns=TENSOR_COLUMNS))
