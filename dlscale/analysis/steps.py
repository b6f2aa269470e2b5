"""The pipeline's analysis rules (rules/analysis.smk, allreduce.smk, replay.smk, runs.smk's order):
each is a `step`'s function (dlscale/runtime/rule.py), given its rule's `Job`: it reads the input
files and params the rule declares, writes the output files it declares, and writes an account of
what it read, wrote and found to the rule's declared log."""

import contextlib
import json
import sys
import threading
import warnings
from pathlib import Path

import pandas as pd

from dlscale.analysis import (
    blocks,
    comm,
    comparisons,
    contention,
    metrics,
    prediction,
    replayed,
    report,
    second_pass,
    sequential,
    tidy,
)
from dlscale.core import pythons
from dlscale.core.vocabulary import RUN_KEYS
from dlscale.runtime import design, replay
from dlscale.workloads import flops, frameworks

# Snakemake runs the rules' steps in threads of its own process (profiles/default); the standard
# output, the warning filters and pyplot's figures are the process's, so steps run one at a time.
ONE_AT_A_TIME = threading.Lock()


@contextlib.contextmanager
def logged(path):
    """Send the step's prints and warnings to its log file (the file is written even when the
    step fails, with the traceback's cause)."""
    Path(path).parent.mkdir(parents=True, exist_ok=True)
    with ONE_AT_A_TIME, open(path, "w") as log, contextlib.redirect_stdout(log), warnings.catch_warnings():
        warnings.simplefilter("always")
        warnings.showwarning = lambda msg, cat, file, line, *_: print(f"warning: {cat.__name__}: {msg} ({file}:{line})")
        try:
            yield
        except BaseException as exc:
            print(f"failed: {type(exc).__name__}: {exc}")
            raise
        finally:
            sys.stdout.flush()


def _wrote(*paths):
    for path in paths:
        print(f"wrote {path}")


def write_tables(job):
    """tidy.csv, runs.csv and tensors.csv (output tidy, runs, tensors) from the runs' status files."""
    status_paths, out = list(job.input), job.output
    with logged(job.log[0]):
        table, runs, tensors = tidy.build(status_paths)
        table.to_csv(out.tidy, index=False)
        runs.to_csv(out.runs, index=False)
        tensors.to_csv(out.tensors, index=False)
        failed = runs[runs["status"] != "ok"] if len(runs) else runs
        print(
            f"read {len(status_paths)} runs: {len(runs) - len(failed)} ok, {len(failed)} failed; {len(table)} tidy rows"
        )
        for r in failed.itertuples():
            print(
                f"failed run: {r.framework} {r.model} {r.allreduce_schedule} nodes={r.nodes} rpn={r.ranks_per_node} "
                f"repeat={r.repeat}: {r.reasons}"
            )
        _wrote(out.tidy, out.runs, out.tensors)


def write_run_metrics(job):
    """run_metrics.csv: one row per run, its iteration time, throughput and phases (metrics.run_table),
    the table the summary, the replay plans and the model read."""
    with logged(job.log[0]):
        runs = metrics.run_table(pd.read_csv(job.input[0]))
        runs.to_csv(job.output[0], index=False)
        print(f"{len(runs)} runs with measured iterations")
        _wrote(job.output[0])


def _run_metrics(path):
    return pd.read_csv(path)


def _runs(path):
    """runs.csv: reasons stay text ("" where none); an identity cell a run known by its path alone
    lacks is NaN."""
    return pd.read_csv(path, keep_default_na=False, na_values={k: [""] for k in RUN_KEYS})


def write_order(job):
    """order.csv: the study's runs (params.matrix) in the design's order (params.design,
    dlscale/runtime/design.py)."""
    settings = json.loads(job.params.design)
    with logged(job.log[0]):
        table = pd.DataFrame(design.order(json.loads(job.params.matrix), settings), columns=design.COLUMNS)
        table.to_csv(job.output[0], index=False)
        print(f"{len(table)} runs, design {json.dumps(settings, sort_keys=True)}")
        _wrote(job.output[0])


def write_flops(job):
    """flops.csv: the training FLOPs per image of each of the study's networks (params models,
    image_size, classes; dlscale/workloads/flops.py), counted on the definitions of params framework
    (`flops.counter`), in its Python (input env's record)."""
    p = job.params
    python = json.loads(Path(job.input.env).read_text())["python"]
    with logged(job.log[0]):
        rows = _flops_in(python, p.framework, p.models, p.image_size, p.classes)
        table = pd.DataFrame(rows, columns=flops.COLUMNS)
        table.to_csv(job.output[0], index=False)
        on = frameworks.get(p.framework).LABEL
        print(f"counted {len(table)} networks on {on}'s definitions ({flops.CONVENTION})")
        _wrote(job.output[0])


def _flops_in(python, framework, models, image_size, classes):
    """flops.table counted in `python`: here where that is this Python, else in a process of its own."""
    if pythons.is_this_python(python):
        return flops.table(models, image_size, classes, framework)
    done = pythons.run_module(python, flops.__name__, [framework, ",".join(models), image_size, classes])
    if done.returncode:
        raise RuntimeError(f"counting FLOPs in {python} failed: {done.stderr.strip()[-2000:]}")
    return json.loads(done.stdout.splitlines()[-1])


def write_second_pass(job):
    """second_pass.csv: per configuration of the first pass (its status files), its interval and the
    repeats it gets in all (params settings, repeats; dlscale/analysis/second_pass.py); the runs it
    adds are the rules' to make."""
    status_paths, out_path = list(job.input), job.output[0]
    with logged(job.log[0]):
        table, runs, _ = tidy.build(status_paths)
        plan = second_pass.plan(metrics.run_table(table), runs, job.params.repeats, **json.loads(job.params.settings))
        plan.to_csv(out_path, index=False)
        added = int((plan["repeats_planned"] - plan["repeats_first"]).sum())
        print(f"read {len(status_paths)} first-pass runs: {len(plan)} configurations, {added} runs added")
        for reason, count in plan["second_pass"].value_counts().items():
            print(f"  {reason}: {count} configurations")
        _wrote(out_path)


def write_look(job):
    """looks/look-N.csv: look N of `design.until_resolved` over every run so far (its status files;
    params settings, repeats, look; dlscale/analysis/sequential.py); the block it adds is the rules'."""
    status_paths, out_path = list(job.input), job.output[0]
    with logged(job.log[0]):
        table, runs, _ = tidy.build(status_paths)
        planned = sequential.plan(
            metrics.run_table(table), runs, job.params.look, json.loads(job.params.settings), job.params.repeats
        )
        planned.to_csv(out_path, index=False)
        print(f"look {job.params.look} over {len(status_paths)} runs, at alpha {planned['alpha'].max():.4g}:")
        for reason, count in planned["decision"].value_counts().items():
            print(f"  {reason}: {count} configurations")
        _wrote(out_path)


def write_summary(job):
    """summary.csv, one row per configuration, and comparisons.csv, each pair of frameworks (and of
    libraries) in each configuration both ran, by the block model at params.alpha and beside it paired
    and independent (dlscale/analysis/comparisons.py: the report's and the figure's one source);
    blocks.csv, the block model's fits; sequential.csv, the looks of design.until_resolved (empty
    without); with a second pass, its plan's columns."""
    inputs, out = job.input, job.output
    with logged(job.log[0]):
        runs = _run_metrics(inputs.run_metrics)
        summary = metrics.summarize(runs, _runs(inputs.runs))
        summary = metrics.add_mfu(summary, pd.read_csv(inputs.peak), pd.read_csv(inputs.flops))
        for plan_path in inputs.plan:
            summary = second_pass.add_plan(summary, pd.read_csv(plan_path))
        summary.to_csv(out.summary, index=False)
        level = job.params.alpha
        pairs = comparisons.study(summary, runs, level)
        pairs.to_csv(out.comparisons, index=False)
        blocks.models(runs)[0].to_csv(out.blocks, index=False)
        _write_sequential(job, runs, _runs(inputs.runs), out.sequential)
        print(
            f"{len(runs)} runs -> {len(summary)} configurations; {len(pairs)} comparisons, resolved: "
            + ", ".join(f"{comparisons.one_analysis(pairs, n)} {w}" for n, w in comparisons.ANALYSES.items())
        )
        _wrote(out.summary, out.comparisons, out.blocks, out.sequential)


def _write_sequential(job, runs, status, out_path):
    """sequential.csv: every look's table of `design.until_resolved` and the final analysis's (empty
    without it)."""
    settings = json.loads(job.params.until_resolved)
    if not settings:
        pd.DataFrame(columns=sequential.COLUMNS).to_csv(out_path, index=False)
        return
    done = [pd.read_csv(p) for p in job.input.looks]
    final = sequential.plan(runs, status, len(done), settings, job.params.repeats, final=True)
    pd.concat(done + [final], ignore_index=True).reindex(columns=sequential.COLUMNS).to_csv(out_path, index=False)


def _comparisons(path):
    """comparisons.csv: verdicts and names stay text; numbers NaN where empty."""
    text = ["dimension", "a", "b", "a_library", "b_library", "verdict", "verdict_paired", "verdict_independent"]
    return pd.read_csv(path, dtype={c: str for c in text}).fillna({c: "" for c in text})


def write_figures(job):
    """The study's figures (every output) from the summary and the comparisons."""
    from dlscale.analysis import figures  # pyplot and seaborn: only the steps that draw pay for them

    with logged(job.log[0]):
        summary, pairs = pd.read_csv(job.input.summary), _comparisons(job.input.comparisons)
        _wrote(*figures.draw_all(summary, pairs, list(job.output)))


def write_comm(job):
    """allreduce.csv and its fit (output sweep, fit) from the sweeps (params.sweeps: path, nodes,
    ranks_per_node of each)."""
    sweeps, out = job.params.sweeps, job.output
    with logged(job.log[0]):
        table, fits = comm.tables([(s["path"], s["nodes"], s["ranks_per_node"]) for s in sweeps])
        table.to_csv(out.sweep, index=False)
        fits.to_csv(out.fit, index=False)
        print(f"{len(sweeps)} sweeps -> {len(table)} rows, {len(fits)} fits")
        _wrote(out.sweep, out.fit)


def write_replay_plans(job):
    """input run_metrics, runs, tensors -> the replay plans (dlscale/runtime/replay.py) of the 1-rank
    runs of params.models."""
    inputs, output, models = job.input, job.output[0], job.params.models
    with logged(job.log[0]):
        _, bases, unusable = prediction.study_baselines(
            _run_metrics(inputs.run_metrics),
            pd.read_csv(inputs.runs, keep_default_na=False, na_values=[""]),
            pd.read_csv(inputs.tensors),
        )
        plans = replay.plans(bases, models)
        if not plans:
            why = "; ".join(sorted(set(unusable.values())))
            raise ValueError(
                f"no successful 1-rank run of {', '.join(models)} to replay (results/runs.csv)"
                + (f": {why}" if why else "")
            )
        Path(output).write_text(json.dumps(plans, indent=1) + "\n")
        print(f"{len(plans)} replay plans")
        _wrote(output)


def write_replayed(job):
    """replayed.csv: what each replay measured (dlscale/analysis/replayed.py `measured`); params.replays:
    the path and node count of each."""
    replays, out_path = job.params.replays, job.output[0]
    with logged(job.log[0]):
        table = replayed.measured([(r["path"], r["nodes"]) for r in replays])
        table.to_csv(out_path, index=False)
        print(f"{len(replays)} replays -> {len(table)} rows, {table['failure'].fillna('').ne('').sum()} failed")
        _wrote(out_path)


def write_contention(job):
    """params.calibrations: [[identity (the baseline keys and the copies as ranks_per_node), trials file]]
    of the study's calibrations; output: contention.csv."""
    with logged(job.log[0]):
        calibrations = json.loads(job.params.calibrations)
        table = contention.table([(run, run["ranks_per_node"], path) for run, path in calibrations])
        table.to_csv(job.output[0], index=False)
        print(f"{len(table)} calibrations, {table['slowdown'].notna().sum()} measured")
        _wrote(job.output[0])


def write_model(job):
    """params.extrapolate: links and ranks to extrapolate to; input: run_metrics, runs, tensors,
    sweep, fit, and the replays' table with their plans; outputs: table
    (model.csv: measured and predicted communication and iteration time per run), replay
    (replay.csv: replayed and predicted iteration time per plan and node count), error
    (model_error.json), gradients (tensors and bytes per framework and model), extrapolation,
    figures."""
    from dlscale.analysis import figures  # as write_figures

    inputs, outputs, extrapolate = job.input, job.output, json.loads(job.params.extrapolate)
    with logged(job.log[0]):
        runs = _run_metrics(inputs.run_metrics)
        status = pd.read_csv(inputs.runs, keep_default_na=False, na_values=[""])
        sweep, fits = pd.read_csv(inputs.sweep), pd.read_csv(inputs.fit)
        calibrations = pd.read_csv(inputs.contention, keep_default_na=False, na_values=[""])
        tensors = pd.read_csv(inputs.tensors)
        table, bases, unusable = prediction.model_table(
            runs, status, tensors, sweep, fits, contention.slowdowns(calibrations)
        )
        table = prediction.with_error_intervals(table, prediction.slowdown_spreads(calibrations))
        error = prediction.model_error(table)
        plans = json.loads(Path(inputs.plans[0]).read_text()) if inputs.plans else []
        measured = replayed.read_table(inputs.replayed)
        replays = replayed.replay_table(measured, plans, sweep, fits)
        replays.to_csv(outputs.replay, index=False)
        if len(replays):
            error["replay"] = replayed.replay_error(replays)
        table.to_csv(outputs.table, index=False)
        with open(outputs.error, "w") as fh:
            json.dump(error, fh, indent=2)
        print(f"model error: {json.dumps(error)}")
        _gradients(status).to_csv(outputs.gradients, index=False)
        ext = prediction.error_band(
            prediction.extrapolate(bases, extrapolate["links"], extrapolate["max_ranks"]), table
        )
        ext.to_csv(outputs.extrapolation, index=False)
        # what the extrapolation figure says when there is nothing to extrapolate from
        no_ext = "; ".join(sorted(set(unusable.values()))) or "no successful 1-rank run to extrapolate from"
        if ext.empty:
            print(f"extrapolation: nothing to extrapolate: {no_ext}")
        _wrote(
            outputs.table,
            outputs.replay,
            outputs.error,
            outputs.gradients,
            outputs.extrapolation,
            *figures.model_fit(table, error, outputs.figures),
            *figures.extrapolation(ext, outputs.figures, no_ext, replays, _checked_to(table, replays)),
            *(figures.replay(replays, error.get("replay", {}), outputs.figures) if _drawn("replay", outputs) else []),
        )


def _gradients(status):
    """gradients.csv: each framework and network's gradient tensors and bytes (from its ok runs)."""
    grads = status[status["status"] == "ok"].dropna(subset=["grad_bytes"])
    first = grads.groupby(["framework", "model"], as_index=False)[["grad_tensors", "grad_bytes"]].first()
    return first.astype({"grad_tensors": int, "grad_bytes": int})


def _checked_to(table, replays):
    """The most ranks the model's predictions were checked against: its measured runs (model.csv),
    or the nodes its replays ran on (replay.csv)."""
    counts = [int(table["ranks"].max())] if len(table) and "ranks" in table else []
    counts += [int(replays["nodes"].max())] if replays is not None and len(replays) and "nodes" in replays else []
    return max(counts, default=None)


def _drawn(name, outputs):
    """Whether the rule declares figure `name` among its outputs (paths.model_figures)."""
    return any(Path(p).stem == name for p in outputs.figures)


def write_report(job):
    """results/report.md (dlscale/analysis/report.py) from the summary, comparisons, runs, environment
    record, allreduce fit, model error and figures; params: the study's title and its whole config."""
    inputs, output, title, config = job.input, job.output, job.params.title, json.loads(job.params.config)
    with logged(job.log[0]):
        summary = pd.read_csv(inputs.summary)
        runs = pd.read_csv(inputs.runs, keep_default_na=False, na_values=[""])
        environment = json.loads(Path(inputs.environment).read_text())
        # the frameworks run in a Python of their own (JAX's environment, a user's): their records
        environment["apart"] = [json.loads(Path(p).read_text()) for p in getattr(inputs, "apart", [])]
        error = json.loads(Path(inputs.error).read_text())
        model_csv = getattr(inputs, "model", None)  # model.csv: the per-configuration error table
        model_table = pd.read_csv(model_csv, keep_default_na=False, na_values=[""]) if model_csv else None
        pairs = _comparisons(inputs.comparisons)
        fits = pd.read_csv(inputs.fit) if getattr(inputs, "fit", None) else None
        blocks_table = pd.read_csv(inputs.blocks) if getattr(inputs, "blocks", None) else None
        looks = pd.read_csv(inputs.sequential) if getattr(inputs, "sequential", None) else None
        tables = report.Tables(summary, runs, environment, error, pairs, model_table, fits, blocks_table, looks)
        _wrote(report.write(tables, config, list(inputs.figures), output[0], title))
