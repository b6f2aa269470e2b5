"""The analysis stages finish on every shape of study, with a reason for every empty part.

A study is made on disk as the runs leave it (run folders with spec.json, every rank's records,
native runs' traces, status.json as the launcher decides it from check_run) plus its allreduce
sweeps, and then driven through dlscale/analysis/steps.py as rules/analysis.smk and rules/allreduce.smk call
it: tables in, tables, figures and the report out. Hypothesis draws the shapes: any subset of the
run matrix, failed and half-written runs, no sweep or a failed one, native runs with and without
traces, zero and NaN phases, one repeat.
"""

import json
import math
import tempfile
from pathlib import Path
from types import SimpleNamespace

import pandas as pd
import pytest
from hypothesis import event, given, settings
from hypothesis import strategies as st

from dlscale.analysis import comm, metrics, model, prediction, steps, tidy
from dlscale.core import paths, ring
from dlscale.core.records import Writer
from dlscale.core.vocabulary import PHASES, RUN_KEYS, SPEC, STATUS, records_name, trace_name
from dlscale.runtime import allreduce, checks, launch
from dlscale.runtime import config as cfg
from dlscale.runtime.rule import Job
from dlscale.workloads import frameworks
from tests.conftest import ENV_RECORD, tiny_config

ENUMS = {k: v["items"]["enum"] for k, v in cfg.schema()["properties"].items() if "enum" in v.get("items", {})}
GRADIENTS = [4 * 1000, 4 * 25_000, 4 * 250_000]  # bytes of each gradient tensor
MAX_RUNS = 24  # a study's runs at most: enough for every shape, few enough for many examples

# How a run ends, and whether its status says ok.
FATES = {
    "ok": True,
    "zero phases": True,  # every phase recorded (or traced) as taking no time
    "nan phase": False,  # a NaN phase (native: wall time) in the records: a malformed line
    "nan loss": False,
    "rank died": False,  # the last rank wrote no end record
    "launch failed": False,  # mpirun failed: spec and no records
    "garbled status": False,  # status.json cut short
}
SWEEP_FATES = ("ok", "one size", "failed", "failed midway", "empty")


def _event_name(framework, cls):
    """A trace event name that the framework's trace rules (its TRACE_RULES) class as `cls`."""
    test, text, _ = next(rule for rule in frameworks.get(framework).TRACE_RULES if rule[2] == cls)
    return text if test == "prefix" else f"op{text}"


def write_trace(path, framework, rank, iterations, phases, comm):
    """A merged trace of the profiled `iterations`: the loop's annotations, one operation of each
    kind and (comm) Horovod's allreduce, each as long as `phases` says (seconds)."""
    events, t = [], 0.0
    for it in iterations:
        start = t
        for name, cat, seconds in [
            ("dlscale:io", "framework", phases["io"]),
            ("dlscale:h2d", "framework", phases["h2d"]),
            ("net/conv:Conv2D", "framework", phases["forward"]),
            (_event_name(framework, "backward"), "framework", phases["backward"]),
            ("ALLREDUCE", "horovod", phases["comm"] if comm else 0.0),
            (_event_name(framework, "update"), "framework", phases["update"]),
        ]:
            events.append({"name": name, "cat": cat, "ph": "X", "ts": t * 1e6, "dur": seconds * 1e6, "pid": rank})
            t += seconds
        t += 1e-4  # the loop's own work: every traced iteration takes some time
        events.append(
            {
                "name": "iteration",
                "cat": "dlscale",
                "ph": "X",
                "ts": start * 1e6,
                "dur": (t - start) * 1e6,
                "pid": rank,
                "args": {"iteration": it},
            }
        )
    path.write_text(json.dumps({"otherData": {"framework": framework}, "traceEvents": events}))


def write_run(config, run, run_dir, fate, scale):
    """One run folder as the launcher and the ranks leave it; returns its status.json path."""
    run_dir.mkdir(parents=True)
    size = run["nodes"] * run["ranks_per_node"]
    spec = launch.run_spec(config, run, run_dir)
    spec["launch"] = {
        "argv": ["mpirun", "-np", str(size)],
        "hosts": [f"node{n}" for n in range(run["nodes"])],
        "mpi": {"version": "Open MPI 4"},
        "environment": ENV_RECORD["key"],
        "emulated": None,
    }
    (run_dir / SPEC).write_text(json.dumps(spec))
    native = run["timing"] == "native"
    profiled = config["profile_iterations"] if native else 0
    phases = {p: 0.0 if fate == "zero phases" else scale * (i + 1) / 100 for i, p in enumerate(PHASES)}
    overlaps = run["framework"] == "torch" and run["allreduce_schedule"] == "overlap"
    framework = {
        "name": run["framework"],
        run["framework"]: "1.0",
        "horovod": "0.28.1",
        "comm_overlaps_backward": overlaps,
    }
    total = config["warmup"] + config["iterations"]
    for rank in range(size):
        if fate == "launch failed":
            break
        w = Writer(run_dir / records_name(rank))
        w.write(
            "run",
            **{k: spec[k] for k in RUN_KEYS},
            rank=rank,
            size=size,
            local_rank=rank % run["ranks_per_node"],
            host=f"node{rank // run['ranks_per_node']}",
            data={"kind": "synthetic"},
            gradients={"tensors": len(GRADIENTS), "bytes": sum(GRADIENTS), "sizes": GRADIENTS},
            provenance={"python": "3.11", "environ": {}, "framework": framework, "launch": spec["launch"]},
        )
        for it in range(total + profiled):
            wall = sum(phases.values()) + 1e-4
            step = {} if native else {f"{p}_s": v for p, v in phases.items()}
            if fate == "nan phase":
                step = {"wall_s": math.nan} if native else {**step, "forward_s": math.nan}
            w.write(
                "step",
                rank=rank,
                iteration=it,
                warmup=it < config["warmup"],
                profiled=it >= total,
                **{"wall_s": wall, **step},
                loss=math.nan if fate == "nan loss" else 1.0,
            )
        if profiled:
            write_trace(
                run_dir / trace_name(rank),
                run["framework"],
                rank,
                range(total, total + profiled),
                phases,
                comm=size > 1,
            )
        if not (fate == "rank died" and rank == size - 1):
            ready = [phases["backward"] * (i + 1) / len(GRADIENTS) for i in range(len(GRADIENTS))]
            w.write(
                "end",
                rank=rank,
                iterations=total + profiled,
                checksum=1.0,
                elapsed_s=1.0,
                **({"gradient_ready_s": ready} if overlaps else {}),
            )
        w.close()
    problems, _ = checks.check_run(run_dir, size, traced=profiled > 0)
    if fate == "launch failed":
        problems.insert(0, "mpirun exited with code 1")
    status = {
        **{k: spec[k] for k in RUN_KEYS},
        "status": "failed" if problems else "ok",
        "reasons": problems,
        "elapsed_s": 1.0,
    }
    text = json.dumps(status)
    (run_dir / STATUS).write_text(text[: len(text) // 2] if fate == "garbled status" else text)
    return run_dir / STATUS


def write_sweep(path, nodes, ranks_per_node, fate, alpha, beta):
    """An allreduce sweep as dlscale/runtime/allreduce.py and launch.measure leave it (its sizes, then a
    failure line where it failed)."""
    ranks, lines = nodes * ranks_per_node, []
    swept = allreduce.sizes(1 << 16)
    for name, pieces, sizes in [
        ("mpi", 1, swept),
        ("horovod", ring.FUSED_PIECES, swept),
        ("horovod_tensors", ring.MANY_PIECES, [m for m in swept if m >= ring.MANY_PIECES * 4]),
    ]:
        for m in sizes[:1] if fate == "one size" else sizes:
            t = ring.ring_time(m, ranks, alpha, beta) + pieces * 1e-6
            lines.append(
                {
                    "schema": ring.SCHEMA,
                    "path": name,
                    "bytes": m,
                    "ranks": ranks,
                    "host": "node0",
                    "transport": name,
                    "times_s": [t] * 5,
                    "median_s": t,
                }
            )
    if fate in ("failed", "failed midway", "empty"):
        lines = lines[: len(lines) // 2] if fate == "failed midway" else []
    if fate in ("failed", "failed midway"):
        lines.append(
            {
                "schema": ring.SCHEMA,
                "failed": "mpirun exited with code 1",
                "error": "MPI_ABORT",
                "nodes": nodes,
                "ranks_per_node": ranks_per_node,
            }
        )
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(json.dumps(line) + "\n" for line in lines))


def make_study(root, fates, sweep_fates, scales=None, alpha=2e-5, beta=1e-9, **dims):
    """A study's config, its run folders and sweeps under `root`: fates[i] is how the matrix's i-th
    run ended (one fate: every run's), sweep_fates[(nodes, ranks_per_node)] how that sweep did (ok
    where not given)."""
    config = tiny_config(root, **dims)
    runs = cfg.matrix(config)
    fates = [fates] * len(runs) if isinstance(fates, str) else fates
    results = Path(config["results"])
    status = [
        write_run(config, run, results / paths.run_folder(run), fates[i], (scales or [1.0] * len(runs))[i])
        for i, run in enumerate(runs)
    ]
    # one sweep per placement of 2 or more ranks (rules/common.smk's SWEEPS)
    sweeps = {
        str(results / "allreduce" / f"nodes{n}_rpn{r}.jsonl"): (n, r)
        for n in config["nodes"]
        for r in config["ranks_per_node"]
        if n * r > 1
    }
    sweep_fates = {(n, r): sweep_fates.get((n, r), "ok") for n, r in sweeps.values()}
    for path, (n, r) in sweeps.items():
        write_sweep(Path(path), n, r, sweep_fates[(n, r)], alpha, beta)
    peak = pd.DataFrame(
        {"framework": config["framework"], "threads": config["threads_per_rank"], "matmul_flops_s": 1e10}
    )
    peak.to_csv(results / "peak.csv", index=False)
    (results / "environment.json").write_text(json.dumps(ENV_RECORD))
    return SimpleNamespace(
        config=config,
        runs=runs,
        fates=fates,
        status=status,
        sweeps=sweeps,
        sweep_fates=sweep_fates,
        results=results,
        logs=Path(root) / "logs",
    )


def analyse(study, draw=True):
    """The analysis rules' steps (rules/analysis.smk, rules/allreduce.smk), in the order Snakemake
    runs them, each given its rule's lists as the rule declares them; draw=False: no study figures
    or report, and the model's figures as PNG only (matplotlib is most of the time)."""
    res, logs, c = study.results, study.logs, study.config
    csv = {k: str(res / file) for k, file in paths.TABLES.items()}

    def log(name):
        return [str(logs / f"{name}.log")]

    tables = {k: csv[k] for k in ("tidy", "runs", "tensors")}
    steps.write_tables(Job.of(input=[str(p) for p in study.status], output=tables, log=log("tidy")))
    steps.write_run_metrics(Job.of(input=[csv["tidy"]], output=[csv["run_metrics"]], log=log("run_metrics")))
    flops_params = {k: c[k] for k in ("image_size", "classes")} | {"models": c["model"]}
    flops_params["framework"] = frameworks.REFERENCE
    flops_in = {"env": str(res / "environment.json")}  # the reference framework's Python: this one
    steps.write_flops(Job.of(input=flops_in, output=[csv["flops"]], params=flops_params, log=log("flops")))
    summary_in = {k: csv[k] for k in ("run_metrics", "runs", "peak", "flops")} | {"plan": [], "looks": []}
    summary_out = {k: csv[k] for k in ("summary", "comparisons", "blocks", "sequential")}
    summary_params = {"alpha": 0.05, "until_resolved": "{}", "repeats": c["repeats"]}
    steps.write_summary(Job.of(input=summary_in, output=summary_out, params=summary_params, log=log("summary")))
    steps.write_replayed(Job.of(output=[csv["replayed"]], params={"replays": []}, log=log("replay_tables")))
    sweeps = [{"path": path, "nodes": n, "ranks_per_node": r} for path, (n, r) in study.sweeps.items()]
    comm_out = {"sweep": csv["allreduce"], "fit": csv["allreduce_fit"]}
    steps.write_comm(Job.of(output=comm_out, params={"sweeps": sweeps}, log=log("allreduce_tables")))
    model_figures = paths.figure_paths(res / "figures", paths.MODEL_FIGURE_NAMES)
    study_figures = paths.figure_paths(res / "figures", paths.FIGURE_NAMES)
    # the shape's calibrations, none of which ran: each says so, and the model assumes no slowdown there
    fixed = {k: c[k] for k in ("image_size", "classes", "precision")}
    asked = cfg.calibrations({**c, "contention": {"trials": 1}})  # as if the shape had asked for them
    calibrations = [[{**run, **fixed}, str(res / f"{paths.contention(run)}.jsonl")] for run in asked]
    calibrated = {"calibrations": json.dumps(calibrations)}
    steps.write_contention(Job.of(output=[csv["contention"]], params=calibrated, log=log("contention_table")))
    model_in = {k: csv[k] for k in ("run_metrics", "runs", "tensors", "replayed", "contention")}
    model_in |= {"sweep": csv["allreduce"], "fit": csv["allreduce_fit"], "plans": []}
    model_out = {
        "table": csv["model"],
        "replay": str(res / "replay.csv"),
        "error": str(res / "model_error.json"),
        "gradients": str(res / "gradients.csv"),
        "extrapolation": str(res / "extrapolation.csv"),
        "figures": model_figures if draw else [p for p in model_figures if p.endswith(".png")],
    }
    extrapolate = json.dumps(c["extrapolate"])
    steps.write_model(Job.of(input=model_in, output=model_out, params={"extrapolate": extrapolate}, log=log("model")))
    if draw:
        figures_in = {k: csv[k] for k in ("summary", "comparisons")}
        steps.write_figures(Job.of(input=figures_in, output=study_figures, log=log("figures")))
        report_in = {k: csv[k] for k in ("summary", "comparisons", "blocks", "sequential", "runs", "model")}
        report_in |= {"environment": str(res / "environment.json"), "error": str(res / "model_error.json")}
        report_in |= {"figures": study_figures + model_figures}
        report_params = {"title": "a study of this shape", "config": json.dumps(c, default=str)}
        report_out = [str(res / "report.md")]
        steps.write_report(Job.of(input=report_in, output=report_out, params=report_params, log=log("report")))


def strict_json(path):
    """A JSON file as a strict parser reads it: NaN is not JSON."""

    def refuse(name):
        raise ValueError(f"{path}: {name} is not JSON")

    return json.loads(Path(path).read_text(), parse_constant=refuse)


def check_tables(study):
    """Every table is there with its header, and every empty part says why."""
    res = study.results
    for name in (
        "tidy",
        "runs",
        "tensors",
        "run_metrics",
        "flops",
        "summary",
        "allreduce",
        "allreduce_fit",
        "model",
        "replay",
        "gradients",
        "extrapolation",
    ):
        assert len(pd.read_csv(res / f"{name}.csv").columns), name  # a header even with no rows
    assert list(pd.read_csv(res / "tidy.csv").columns) == tidy.TIDY_COLUMNS
    assert list(pd.read_csv(res / "run_metrics.csv").columns) == metrics.RUN_METRICS_COLUMNS
    assert list(pd.read_csv(res / "allreduce.csv").columns) == comm.SWEEP_COLUMNS
    assert list(pd.read_csv(res / "allreduce_fit.csv").columns) == comm.FIT_COLUMNS

    # a calibration per configuration on 2 or more ranks per node; none ran, so each says so and the
    # model assumes no slowdown there, saying so too
    calibrated = pd.read_csv(res / "contention.csv", keep_default_na=False)
    shared = {(r["framework"], r["model"], r["ranks_per_node"]) for r in study.runs if r["ranks_per_node"] > 1}
    assert set(zip(calibrated["framework"], calibrated["model"], calibrated["ranks_per_node"])) == shared
    assert (calibrated["failure"] == "no trial measured").all() and (calibrated["slowdown"] == "").all()
    modelled = pd.read_csv(res / "model.csv", keep_default_na=False)
    assert modelled.loc[modelled["ranks_per_node"] > 1, "slowdown_source"].str.startswith("assumed 1").all()

    runs = pd.read_csv(res / "runs.csv", keep_default_na=False)
    assert set(tidy.RUNS_COLUMNS) <= set(runs.columns)
    assert runs["status"].eq("ok").tolist() == [FATES[f] for f in study.fates]
    assert (runs.loc[runs["status"] != "ok", "reasons"] != "").all()

    summary = pd.read_csv(res / "summary.csv")  # every run counted once (a run known by its path alone too)
    assert (summary["repeats_ok"] + summary["repeats_failed"]).sum() == len(study.runs)

    table = pd.read_csv(res / "model.csv", keep_default_na=False, na_values=[""])
    assert list(table.columns) == prediction.COLUMNS and len(table) == runs["status"].eq("ok").sum()
    predicted = table["predicted_iteration_s"].notna()
    assert table.loc[~predicted, "not_predicted"].notna().all()  # every run not predicted says why
    assert table.loc[predicted, "not_predicted"].isna().all()
    assert table.loc[predicted, ["predicted_iteration_s", "predicted_comm_total_s"]].map(math.isfinite).all().all()
    assert not (predicted & (table["ranks"] < 2)).any()

    error = strict_json(res / "model_error.json")
    assert error["runs"] == predicted.sum()
    if not error["runs"]:
        multi = table[table["ranks"] > 1]
        assert error["reason"] == (
            "no successful run"
            if table.empty
            else "no run with 2 or more ranks"
            if multi.empty
            else "; ".join(sorted(set(multi["not_predicted"])))
        )
    if study.config["profile_iterations"] == 0:  # native runs without traces: never predicted, and why
        native = table[(table["timing"] == "native") & (table["ranks"] > 1)]
        assert native["not_predicted"].isin([prediction.NO_TRACES, prediction.NO_BASELINE]).all()
    for (n, r), fate in study.sweep_fates.items():
        if fate in ("failed", "failed midway", "empty"):
            assert not (predicted & (table["nodes"] == n) & (table["ranks_per_node"] == r)).any()

    ext = pd.read_csv(res / "extrapolation.csv")
    assert ext["predicted_efficiency"].between(0, 1 + 1e-9).all()
    for name in ("tidy", "summary", "allreduce_tables", "model"):
        assert "wrote " in (study.logs / f"{name}.log").read_text(), name
    return table, error


def check_drawn(study, error):
    """Every figure is drawn (an empty one says why) and the report says why nothing was predicted."""
    for path in paths.figure_paths(study.results / "figures", paths.FIGURE_NAMES + paths.MODEL_FIGURE_NAMES):
        assert Path(path).stat().st_size > 0, path
    report = (study.results / "report.md").read_text()
    assert "## Performance model" in report
    if error.get("reason"):
        assert f"Nothing predicted for the study's runs: {error['reason']}." in report
    if not any(FATES[f] for f in study.fates):
        assert "Nothing to show: no successful run" in report


# Choices repeated to weight them: most draws have a 1-rank baseline, more ranks, an ok sweep and ok
# runs, so that something is predicted. Shrinking goes to the first choice: the simplest study.
NODES = ([1], [1, 2], [1], [2])
RANKS_PER_NODE = ([1, 2], [1], [1, 2], [2])
RUN_FATES = ["ok"] * 6 + list(FATES)
SWEEP_CHOICES = ["ok"] * 3 + list(SWEEP_FATES)


@st.composite
def studies(draw):
    """A study's matrix (any subset of each dimension, at most MAX_RUNS runs), how each run and
    sweep ended and how long its phases take."""
    dims = {
        "framework": draw(st.lists(st.sampled_from(ENUMS["framework"]), min_size=1, max_size=2, unique=True)),
        "model": draw(st.lists(st.sampled_from(ENUMS["model"]), min_size=1, max_size=2, unique=True)),
        "allreduce_schedule": draw(st.lists(st.sampled_from(ENUMS["allreduce_schedule"]), min_size=1, unique=True)),
        "timing": draw(st.lists(st.sampled_from(ENUMS["timing"]), min_size=1, unique=True)),
        "nodes": draw(st.sampled_from(NODES)),
        "ranks_per_node": draw(st.sampled_from(RANKS_PER_NODE)),
    }
    repeats = draw(st.integers(1, 2))
    for key in ("model", "framework", "allreduce_schedule", "timing", "nodes", "ranks_per_node"):  # down to MAX_RUNS
        while len(dims[key]) > 1 and math.prod(map(len, dims.values())) * repeats > MAX_RUNS:
            dims[key] = dims[key][:-1]
    count = math.prod(map(len, dims.values())) * repeats
    fates = draw(
        st.one_of(st.just(["ok"] * count), st.lists(st.sampled_from(RUN_FATES), min_size=count, max_size=count))
    )
    placements = [(n, r) for n in dims["nodes"] for r in dims["ranks_per_node"] if n * r > 1]
    sweep_fates = {p: draw(st.sampled_from(SWEEP_CHOICES)) for p in placements}
    return dict(
        dims=dims,
        repeats=repeats,
        fates=fates,
        sweep_fates=sweep_fates,
        profile_iterations=draw(st.sampled_from([1, 0, 2])),
        scales=draw(st.lists(st.floats(1e-3, 1.0), min_size=count, max_size=count)),
        alpha=draw(st.floats(1e-6, 1e-3)),
        beta=draw(st.floats(1e-11, 1e-8)),
    )


def build(root, shape):
    return make_study(
        root,
        shape["fates"],
        shape["sweep_fates"],
        shape["scales"],
        shape["alpha"],
        shape["beta"],
        repeats=shape["repeats"],
        profile_iterations=shape["profile_iterations"],
        **shape["dims"],
    )


# The Hypothesis tests' timeouts end the whole pytest process (method thread), with every thread's
# stack: a signal's exception would be taken for the example failing, and shrinking would run the
# hanging example again with no alarm left.
@pytest.mark.timeout(240, method="thread")
@settings(max_examples=60, deadline=None)
@given(shape=studies())
def test_every_study_shape_makes_every_table_with_its_reasons(shape):
    with tempfile.TemporaryDirectory() as root:
        study = build(Path(root), shape)
        analyse(study, draw=False)
        _, error = check_tables(study)
    # what the examples covered (pytest --hypothesis-show-statistics)
    event(f"model: {error.get('reason') or 'some runs predicted'}")
    event(f"profile_iterations {shape['profile_iterations']}, timing {shape['dims']['timing']}")


@pytest.mark.timeout(300, method="thread")
@settings(max_examples=12, deadline=None)
@given(shape=studies())
def test_every_study_shape_draws_its_figures_and_report(shape):
    with tempfile.TemporaryDirectory() as root:
        study = build(Path(root), shape)
        analyse(study)
        _, error = check_tables(study)
        check_drawn(study, error)


NOT_FINITE = st.sampled_from([math.nan, math.inf, -math.inf])


@pytest.mark.timeout(60, method="thread")
@settings(max_examples=300, deadline=None)
@given(
    ready=st.lists(st.one_of(st.floats(-1.0, 1e3), NOT_FINITE), max_size=6),
    sizes=st.lists(st.integers(0, 1 << 30), max_size=6),
    cost=st.one_of(st.floats(0.0, 10.0), NOT_FINITE),
)
def test_schedule_finishes_or_refuses_its_inputs(ready, sizes, cost):
    """No input hangs the schedule: finite ones give finite times, any other is a ValueError."""
    sizes = sizes[: len(ready)]
    ready = ready[: len(sizes)]
    try:
        end, busy = model.schedule(ready, sizes, lambda m: cost + m * 1e-9)
    except ValueError as exc:
        assert "cannot schedule allreduces" in str(exc)
        assert not all(map(math.isfinite, ready + [cost]))
    else:
        assert math.isfinite(end) and math.isfinite(busy)


@settings(max_examples=300, deadline=None)
@given(
    ready=st.lists(st.floats(0.0, 1.0), min_size=1, max_size=6),
    sizes=st.lists(st.integers(1, 1 << 28), min_size=1, max_size=6),
    rate=st.floats(0.05, 1.0),
    backward=st.floats(0.01, 1.0),
)
def test_sharing_the_cpus_slows_the_allreduces_and_backward_never_speeds_them(ready, sizes, rate, backward):
    """Compute and allreduces sharing a rank's CPUs (processor sharing): backward ends no sooner than alone,
    the allreduces run no shorter than at the sweep's speed, and no iteration comes out faster than at
    full speed; the slower the shared rate, the longer the iteration."""
    n = min(len(ready), len(sizes))
    base = {**dict.fromkeys(model.COMPUTE, 0.0), model.BACKWARD_S: backward}
    gradients = model.Gradients(sizes[:n], [r * backward for r in ready[:n]])
    cost = model.Cost(lambda m: m * 1e-9)  # linear: however they fuse, the allreduces' work is the same
    free = model.predict(base, gradients, 2, cost)
    shared = model.predict(base, gradients, 2, cost, rate=rate)
    slower = model.predict(base, gradients, 2, cost, rate=rate / 2)
    cycle = model.CYCLE_TIME_S  # the schedules may meet Horovod's cycles one apart
    assert shared["comm_total_s"] >= free["comm_total_s"] - 1e-12
    assert shared["iteration_s"] >= free["iteration_s"] - cycle
    assert slower["iteration_s"] >= shared["iteration_s"] - cycle
    assert shared["iteration_s"] >= backward + shared["comm_exposed_s"] - 1e-12


@settings(max_examples=300, deadline=None)
@given(
    ready=st.lists(st.floats(0.0, 1.0), min_size=1, max_size=6),
    sizes=st.lists(st.integers(1, 1 << 28), min_size=1, max_size=6),
    compute=st.floats(0.05, 1.0),
    comm=st.floats(0.05, 1.0),
    backward=st.floats(0.01, 1.0),
)
def test_compute_and_allreduces_each_at_their_own_rate(ready, sizes, compute, comm, backward):
    """Two rates (model.Sharing: each measured beside the other): equal ones are the one rate; an allreduce
    that slows no compute leaves backward as long as alone, and each rate lower never shortens the iteration."""
    n = min(len(ready), len(sizes))
    base = {**dict.fromkeys(model.COMPUTE, 0.0), model.BACKWARD_S: backward}
    gradients = model.Gradients(sizes[:n], [r * backward for r in ready[:n]])
    cost = model.Cost(lambda m: m * 1e-9)

    def at(c, a):
        return model.predict(base, gradients, 2, cost, rate=model.Sharing(c, a))

    assert at(comm, comm) == model.predict(base, gradients, 2, cost, rate=comm)
    both, cycle = at(compute, comm), model.CYCLE_TIME_S
    unslowed = at(1.0, comm)
    assert unslowed["iteration_s"] - unslowed["comm_exposed_s"] == pytest.approx(backward, rel=1e-6, abs=1e-12)
    assert at(compute / 2, comm)["iteration_s"] >= both["iteration_s"] - cycle
    assert at(compute, comm / 2)["iteration_s"] >= both["iteration_s"] - cycle
    assert both["comm_total_s"] >= at(1.0, 1.0)["comm_total_s"] - 1e-12


# Plain regressions of the study shapes that stopped the pipeline (issue 29).


@pytest.mark.timeout(60)
def test_a_study_of_one_rank_runs_only_ends_with_every_table_and_why(tmp_path):
    study = make_study(
        tmp_path, "ok", {}, framework=["torch"], model=["tinynet"], ranks_per_node=[1], nodes=[1], repeats=2
    )
    assert study.sweeps == {}  # no placement of 2 or more ranks: no sweep
    analyse(study)
    table, error = check_tables(study)
    assert error["reason"] == "no run with 2 or more ranks" and error["runs"] == 0
    assert set(table["not_predicted"]) == {prediction.BASELINE_ITSELF}
    assert len(pd.read_csv(study.results / "extrapolation.csv")) > 0  # the 1-rank runs still extrapolate
    check_drawn(study, error)


@pytest.mark.timeout(60)
def test_a_study_whose_runs_all_failed_ends_with_every_table_and_why(tmp_path):
    study = make_study(tmp_path, "launch failed", {}, framework=["torch"], model=["tinynet"])
    analyse(study)
    table, error = check_tables(study)
    assert table.empty and error["reason"] == "no successful run"
    report = (study.results / "report.md").read_text()
    assert "Nothing to show: no successful run" in report and "mpirun exited with code 1" in report
    assert "Nothing predicted for the study's runs: no successful run." in report


@pytest.mark.timeout(60)
def test_native_runs_without_traces_are_not_predicted_and_say_why(tmp_path):
    # sequential: every gradient is ready when backward ends, a NaN that hung the schedule
    study = make_study(
        tmp_path,
        "ok",
        {},
        framework=["torch"],
        model=["tinynet"],
        allreduce_schedule=["overlap", "sequential"],
        timing=["native"],
        profile_iterations=0,
    )
    analyse(study, draw=False)
    table, error = check_tables(study)
    two = table[table["ranks"] == 2]
    assert len(two) == 2 and two["predicted_iteration_s"].isna().all()
    assert two["not_predicted"].tolist() == [prediction.NO_TRACES] * 2
    assert error["reason"] == prediction.NO_TRACES
    assert pd.read_csv(study.results / "extrapolation.csv").empty
    assert f"nothing to extrapolate: {prediction.NO_TRACES}" in (study.logs / "model.log").read_text()
