"""The analysis rules' steps: each reads its `Job`'s inputs and params, writes its outputs, logs what it found."""

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
from dlscale.core.vocabulary import RUN_KEYS, TEXT_COLUMNS
from dlscale.runtime import design, replay
from dlscale.workloads import flops, frameworks

# The standard output, the warning filters and pyplot's figures are the process's: one step at a time.
ONE_AT_A_TIME = threading.Lock()


@contextlib.contextmanager
def logged(path):
    """Send the step's prints and warnings to its log file (written even when the step fails, with why)."""
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
        for frame, path in ((table, out.tidy), (runs, out.runs), (tensors, out.tensors)):
            frame.to_csv(path, index=False)
        failed = runs[runs["status"] != "ok"] if len(runs) else runs
        ok = len(runs) - len(failed)
        print(f"read {len(status_paths)} runs: {ok} ok, {len(failed)} failed; {len(table)} tidy rows")
        for r in failed.itertuples():
            run = f"{r.framework} {r.model} {r.allreduce_schedule} nodes={r.nodes} rpn={r.ranks_per_node}"
            print(f"failed run: {run} repeat={r.repeat}: {r.reasons}")
        _wrote(out.tidy, out.runs, out.tensors)


def write_run_metrics(job):
    """run_metrics.csv: one row per run, its iteration time, throughput and phases (metrics.run_table)."""
    with logged(job.log[0]):
        runs = metrics.run_table(pd.read_csv(job.input[0]))
        runs.to_csv(job.output[0], index=False)
        print(f"{len(runs)} runs with measured iterations")
        _wrote(job.output[0])


def _run_metrics(path):
    return pd.read_csv(path)


def _runs(path):
    """runs.csv: reasons stay text ("" where none); identity cells a run known by its path lacks are NaN."""
    return pd.read_csv(path, keep_default_na=False, na_values={k: [""] for k in RUN_KEYS}, dtype=TEXT_COLUMNS)


def write_order(job):
    """order.csv: the study's runs (params.matrix) in the design's order (params.design)."""
    settings = json.loads(job.params.design)
    with logged(job.log[0]):
        table = pd.DataFrame(design.order(json.loads(job.params.matrix), settings), columns=design.COLUMNS)
        table.to_csv(job.output[0], index=False)
        print(f"{len(table)} runs, design {json.dumps(settings, sort_keys=True)}")
        _wrote(job.output[0])


def write_flops(job):
    """flops.csv: params models' training FLOPs per image on params framework's definitions (its Python: input env)."""
    p = job.params
    python = json.loads(Path(job.input.env).read_text())["python"]
    with logged(job.log[0]):
        if pythons.is_this_python(python):
            rows = flops.table(p.models, p.image_size, p.classes, p.framework)
        else:
            argv = [p.framework, ",".join(p.models), p.image_size, p.classes]
            done = pythons.run_module(python, flops.__name__, argv)
            if done.returncode:
                raise RuntimeError(f"counting FLOPs in {python} failed: {done.stderr.strip()[-2000:]}")
            rows = json.loads(done.stdout.splitlines()[-1])
        table = pd.DataFrame(rows, columns=flops.COLUMNS)
        table.to_csv(job.output[0], index=False)
        on = frameworks.get(p.framework).LABEL
        print(f"counted {len(table)} networks on {on}'s definitions ({flops.CONVENTION})")
        _wrote(job.output[0])


def write_second_pass(job):
    """second_pass.csv: per first-pass configuration, its interval and the repeats it gets in all (params)."""
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
    """looks/look-N.csv: look N of `design.until_resolved` over every run so far (params settings, repeats, look)."""
    status_paths, out_path, p = list(job.input), job.output[0], job.params
    with logged(job.log[0]):
        table, runs, _ = tidy.build(status_paths)
        planned = sequential.plan(metrics.run_table(table), runs, p.look, json.loads(p.settings), p.repeats)
        planned.to_csv(out_path, index=False)
        print(f"look {p.look} over {len(status_paths)} runs, at alpha {planned['alpha'].max():.4g}:")
        for reason, count in planned["decision"].value_counts().items():
            print(f"  {reason}: {count} configurations")
        _wrote(out_path)


def write_summary(job):
    """summary.csv, comparisons.csv (framework and library pairs, at params.alpha), blocks.csv, sequential.csv."""
    inputs, out = job.input, job.output
    with logged(job.log[0]):
        runs = _run_metrics(inputs.run_metrics)
        summary = metrics.summarize(runs, _runs(inputs.runs))
        summary = metrics.add_mfu(summary, pd.read_csv(inputs.peak), pd.read_csv(inputs.flops))
        for plan_path in inputs.plan:
            summary = second_pass.add_plan(summary, pd.read_csv(plan_path))
        summary.to_csv(out.summary, index=False)
        pairs = comparisons.study(summary, runs, job.params.alpha)
        pairs.to_csv(out.comparisons, index=False)
        blocks.models(runs)[0].to_csv(out.blocks, index=False)
        _write_sequential(job, runs, _runs(inputs.runs), out.sequential)
        resolved = ", ".join(f"{comparisons.one_analysis(pairs, n)} {w}" for n, w in comparisons.ANALYSES.items())
        print(f"{len(runs)} runs -> {len(summary)} configurations; {len(pairs)} comparisons, resolved: {resolved}")
        _wrote(out.summary, out.comparisons, out.blocks, out.sequential)


def _write_sequential(job, runs, status, out_path):
    """sequential.csv: every look's table of `design.until_resolved` and the final analysis's (or none)."""
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
    """allreduce.csv and its fit (output sweep, fit) from the sweeps (params.sweeps: path, nodes, ranks_per_node)."""
    sweeps, out = job.params.sweeps, job.output
    with logged(job.log[0]):
        table, fits = comm.tables([(s["path"], s["nodes"], s["ranks_per_node"]) for s in sweeps])
        table.to_csv(out.sweep, index=False)
        fits.to_csv(out.fit, index=False)
        print(f"{len(sweeps)} sweeps -> {len(table)} rows, {len(fits)} fits")
        _wrote(out.sweep, out.fit)


def write_replay_plans(job):
    """input run_metrics, runs, tensors -> the replay plans of the 1-rank runs of params.models."""
    inputs, output, models = job.input, job.output[0], job.params.models
    with logged(job.log[0]):
        _, bases, unusable = prediction.study_baselines(
            _run_metrics(inputs.run_metrics), replayed.read_table(inputs.runs), pd.read_csv(inputs.tensors)
        )
        plans = replay.plans(bases, models)
        if not plans:
            why = "; ".join(sorted(set(unusable.values())))
            what = f"no successful 1-rank run of {', '.join(models)} to replay (results/runs.csv)"
            raise ValueError(what + (f": {why}" if why else ""))
        Path(output).write_text(json.dumps(plans, indent=1) + "\n")
        print(f"{len(plans)} replay plans")
        _wrote(output)


def write_replayed(job):
    """replayed.csv: what each replay measured; params.replays: the path and node count of each."""
    replays, out_path = job.params.replays, job.output[0]
    with logged(job.log[0]):
        table = replayed.measured([(r["path"], r["nodes"]) for r in replays])
        table.to_csv(out_path, index=False)
        print(f"{len(replays)} replays -> {len(table)} rows, {table['failure'].fillna('').ne('').sum()} failed")
        _wrote(out_path)


def write_contention(job):
    """contention.csv from params.calibrations: [[identity (copies as ranks_per_node), trials file]]."""
    with logged(job.log[0]):
        calibrations = json.loads(job.params.calibrations)
        table = contention.table([(run, run["ranks_per_node"], path) for run, path in calibrations])
        table.to_csv(job.output[0], index=False)
        print(f"{len(table)} calibrations, {table['slowdown'].notna().sum()} measured")
        _wrote(job.output[0])


def write_model(job):
    """The model's tables, error, extrapolation (to params.extrapolate's links and ranks) and figures (outputs)."""
    from dlscale.analysis import figures  # as write_figures

    inputs, outputs, extrapolate = job.input, job.output, json.loads(job.params.extrapolate)
    with logged(job.log[0]):
        runs, status = _run_metrics(inputs.run_metrics), replayed.read_table(inputs.runs)
        sweep, fits = pd.read_csv(inputs.sweep), pd.read_csv(inputs.fit)
        calibrations, tensors = replayed.read_table(inputs.contention), pd.read_csv(inputs.tensors)
        slowdowns = contention.slowdowns(calibrations)
        table, bases, unusable = prediction.model_table(runs, status, tensors, sweep, fits, prediction.Node(slowdowns))
        table = prediction.with_error_intervals(table, prediction.slowdown_spreads(calibrations))
        error = prediction.model_error(table)
        plans = json.loads(Path(inputs.plans[0]).read_text()) if inputs.plans else []
        replays = replayed.replay_table(replayed.read_table(inputs.replayed), plans, sweep, fits)
        replays.to_csv(outputs.replay, index=False)
        if len(replays):
            error["replay"] = replayed.replay_error(replays)
        table.to_csv(outputs.table, index=False)
        Path(outputs.error).write_text(json.dumps(error, indent=2))
        print(f"model error: {json.dumps(error)}")
        _gradients(status).to_csv(outputs.gradients, index=False)
        ext = prediction.extrapolate(bases, extrapolate["links"], extrapolate["max_ranks"])
        ext = prediction.error_band(ext, table)
        ext.to_csv(outputs.extrapolation, index=False)
        # what the extrapolation figure says when there is nothing to extrapolate from
        no_ext = "; ".join(sorted(set(unusable.values()))) or "no successful 1-rank run to extrapolate from"
        if ext.empty:
            print(f"extrapolation: nothing to extrapolate: {no_ext}")
        drawn = [*figures.model_fit(table, error, outputs.figures)]
        drawn += figures.extrapolation(ext, outputs.figures, no_ext, replays, _checked_to(table, replays))
        if any(Path(p).stem == "replay" for p in outputs.figures):  # the rule declares the replay figure
            drawn += figures.replay(replays, error.get("replay", {}), outputs.figures)
        _wrote(outputs.table, outputs.replay, outputs.error, outputs.gradients, outputs.extrapolation, *drawn)


def _gradients(status):
    """gradients.csv: each framework and network's gradient tensors and bytes (from its ok runs)."""
    grads = status[status["status"] == "ok"].dropna(subset=["grad_bytes"])
    first = grads.groupby(["framework", "model"], as_index=False)[["grad_tensors", "grad_bytes"]].first()
    return first.astype({"grad_tensors": int, "grad_bytes": int})


def _checked_to(table, replays):
    """The most ranks the model's predictions were checked against: its measured runs, or its replays' nodes."""
    counts = [int(table["ranks"].max())] if len(table) and "ranks" in table else []
    counts += [int(replays["nodes"].max())] if replays is not None and len(replays) and "nodes" in replays else []
    return max(counts, default=None)


def write_report(job):
    """results/report.md from the study's tables, records and figures; params: its title and whole config."""
    inputs, output, title, config = job.input, job.output, job.params.title, json.loads(job.params.config)
    with logged(job.log[0]):
        summary, runs = pd.read_csv(inputs.summary), replayed.read_table(inputs.runs)
        environment = json.loads(Path(inputs.environment).read_text())
        # the frameworks run in a Python of their own (JAX's environment, a user's): their records
        environment["apart"] = [json.loads(Path(p).read_text()) for p in getattr(inputs, "apart", [])]
        error = json.loads(Path(inputs.error).read_text())
        has_model = getattr(inputs, "model", None)  # the per-configuration error
        model_table = replayed.read_table(inputs.model) if has_model else None
        pairs = _comparisons(inputs.comparisons)
        fits = pd.read_csv(inputs.fit) if getattr(inputs, "fit", None) else None
        blocks_table = pd.read_csv(inputs.blocks) if getattr(inputs, "blocks", None) else None
        looks = pd.read_csv(inputs.sequential) if getattr(inputs, "sequential", None) else None
        tables = report.Tables(summary, runs, environment, error, pairs, model_table, fits, blocks_table, looks)
        _wrote(report.write(tables, config, list(inputs.figures), output[0], title))
