"""The pipeline's analysis steps (called from rules/analysis.smk and rules/allreduce.smk): each
reads the input files and writes the output files its rule declares, named by the rule, and writes
an account of what it read, wrote and found to the rule's declared log."""

import contextlib
import json
import sys
import threading
import warnings
from pathlib import Path

import pandas as pd

from dlscale.analysis import comm, comparisons, figures, metrics, prediction, replayed, report, second_pass, tidy
from dlscale.core.vocabulary import RUN_KEYS
from dlscale.runtime import design, replay
from dlscale.workloads import flops

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


def write_tables(status_paths, tidy_path, runs_path, tensors_path, log_path):
    with logged(log_path):
        table, runs, tensors = tidy.build(status_paths)
        table.to_csv(tidy_path, index=False)
        runs.to_csv(runs_path, index=False)
        tensors.to_csv(tensors_path, index=False)
        failed = runs[runs["status"] != "ok"] if len(runs) else runs
        print(
            f"read {len(status_paths)} runs: {len(runs) - len(failed)} ok, {len(failed)} failed; {len(table)} tidy rows"
        )
        for r in failed.itertuples():
            print(
                f"failed run: {r.framework} {r.model} {r.comm} nodes={r.nodes} rpn={r.ranks_per_node} "
                f"repeat={r.repeat}: {r.reasons}"
            )
        _wrote(tidy_path, runs_path, tensors_path)


def write_run_metrics(tidy_path, out_path, log_path):
    """run_metrics.csv: one row per run, its iteration time, throughput and phases (metrics.run_table),
    the table the summary, the replay plans and the model read."""
    with logged(log_path):
        runs = metrics.run_table(pd.read_csv(tidy_path))
        runs.to_csv(out_path, index=False)
        print(f"{len(runs)} runs with measured iterations")
        _wrote(out_path)


def _run_metrics(path):
    return pd.read_csv(path)


def _runs(path):
    """runs.csv: reasons stay text ("" where none); an identity cell a run known by its path alone
    lacks is NaN."""
    return pd.read_csv(path, keep_default_na=False, na_values={k: [""] for k in RUN_KEYS})


def write_order(runs, settings, out_path, log_path):
    """order.csv: the study's runs in the design's order (dlscale/runtime/design.py)."""
    with logged(log_path):
        table = pd.DataFrame(design.order(runs, settings), columns=design.COLUMNS)
        table.to_csv(out_path, index=False)
        print(f"{len(table)} runs, design {json.dumps(settings, sort_keys=True)}")
        _wrote(out_path)


def write_flops(models, image_size, classes, out_path, log_path):
    """flops.csv: the training FLOPs per image of each of the study's networks (dlscale/workloads/flops.py)."""

    with logged(log_path):
        table = pd.DataFrame(flops.table(models, image_size, classes), columns=flops.COLUMNS)
        table.to_csv(out_path, index=False)
        print(f"counted {len(table)} networks ({flops.CONVENTION})")
        _wrote(out_path)


def write_second_pass(status_paths, out_path, repeats, settings, log_path):
    """second_pass.csv: per configuration of the first pass, its interval and the repeats it gets in
    all (dlscale/analysis/second_pass.py); the runs it adds are the rules' to make."""
    with logged(log_path):
        table, runs, _ = tidy.build(status_paths)
        plan = second_pass.plan(metrics.run_table(table), runs, repeats, **settings)
        plan.to_csv(out_path, index=False)
        added = int((plan["repeats_planned"] - plan["repeats_first"]).sum())
        print(f"read {len(status_paths)} first-pass runs: {len(plan)} configurations, {added} runs added")
        for reason, count in plan["second_pass"].value_counts().items():
            print(f"  {reason}: {count} configurations")
        _wrote(out_path)


def write_summary(
    run_metrics_path, runs_path, out_path, comparisons_path, log_path, peak_path, flops_path, plan_path=None
):
    """summary.csv, one row per configuration, and comparisons.csv, each pair of frameworks (and of
    libraries) in each configuration both ran, paired by block and independent
    (dlscale/analysis/comparisons.py: the report's and the figure's one source)."""
    with logged(log_path):
        runs = _run_metrics(run_metrics_path)
        summary = metrics.summarize(runs, _runs(runs_path))
        summary = metrics.add_mfu(summary, pd.read_csv(peak_path), pd.read_csv(flops_path))
        if plan_path:
            summary = second_pass.add_plan(summary, pd.read_csv(plan_path))
        summary.to_csv(out_path, index=False)
        pairs = comparisons.study(summary, runs)
        pairs.to_csv(comparisons_path, index=False)
        print(
            f"{len(runs)} runs -> {len(summary)} configurations; {len(pairs)} comparisons, resolved: "
            f"{comparisons.one_analysis(pairs)} paired, {comparisons.one_analysis(pairs, '_independent')} independent"
        )
        _wrote(out_path, comparisons_path)


def _comparisons(path):
    """comparisons.csv: verdicts and names stay text; numbers NaN where empty."""
    text = ["dimension", "a", "b", "a_library", "b_library", "verdict", "verdict_independent"]
    return pd.read_csv(path, dtype={c: str for c in text}).fillna({c: "" for c in text})


def write_figures(summary_path, comparisons_path, paths, log_path):
    with logged(log_path):
        _wrote(*figures.draw_all(pd.read_csv(summary_path), _comparisons(comparisons_path), paths))


def write_comm(sweeps, sweep_path, fit_path, log_path):
    """sweeps: {path: (nodes, ranks_per_node)}."""
    with logged(log_path):
        table, fits = comm.tables([(path, n, r) for path, (n, r) in sweeps.items()])
        table.to_csv(sweep_path, index=False)
        fits.to_csv(fit_path, index=False)
        print(f"{len(sweeps)} sweeps -> {len(table)} rows, {len(fits)} fits")
        _wrote(sweep_path, fit_path)


def write_replay_plans(inputs, output, models, log_path):
    """inputs: run_metrics, runs, tensors -> the replay plans (dlscale/runtime/replay.py) of the listed models' 1-rank
    runs."""
    with logged(log_path):
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


def write_replayed(replays, out_path, log_path):
    """replayed.csv: what each replay measured (dlscale/analysis/replayed.py `measured`). replays: {path: nodes}."""
    with logged(log_path):
        table = replayed.measured(list(replays.items()))
        table.to_csv(out_path, index=False)
        print(f"{len(replays)} replays -> {len(table)} rows, {table['failure'].fillna('').ne('').sum()} failed")
        _wrote(out_path)


def write_model(inputs, outputs, extrapolate, log_path):
    """inputs: run_metrics, runs, tensors, sweep, fit, and the replays' table with their plans; outputs: table
    (model.csv: measured and predicted communication and iteration time per run), replay
    (replay.csv: replayed and predicted iteration time per plan and node count), error
    (model_error.json), gradients (tensors and bytes per framework and model), extrapolation,
    figures."""
    with logged(log_path):
        runs = _run_metrics(inputs.run_metrics)
        status = pd.read_csv(inputs.runs, keep_default_na=False, na_values=[""])
        sweep, fits = pd.read_csv(inputs.sweep), pd.read_csv(inputs.fit)
        table, bases, unusable = prediction.model_table(runs, status, pd.read_csv(inputs.tensors), sweep, fits)
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
        grads = status[status["status"] == "ok"].dropna(subset=["grad_bytes"])
        (
            grads.groupby(["framework", "model"], as_index=False)[["grad_tensors", "grad_bytes"]]
            .first()
            .astype({"grad_tensors": int, "grad_bytes": int})
            .to_csv(outputs.gradients, index=False)
        )
        ext = prediction.extrapolate(bases, extrapolate["links"], extrapolate["max_ranks"])
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
            *figures.extrapolation(ext, outputs.figures, no_ext, replays),
            *(figures.replay(replays, error.get("replay", {}), outputs.figures) if _drawn("replay", outputs) else []),
        )


def _drawn(name, outputs):
    """Whether the rule declares figure `name` among its outputs (figures.model_figures)."""
    return any(Path(p).stem == name for p in outputs.figures)


def write_report(inputs, output, config, title, log_path):
    """results/report.md (dlscale/analysis/report.py) from the summary, comparisons, runs, environment
    record, allreduce fit, model error and figures; `title`: the study's."""
    with logged(log_path):
        summary = pd.read_csv(inputs.summary)
        runs = pd.read_csv(inputs.runs, keep_default_na=False, na_values=[""])
        environment = json.loads(Path(inputs.environment).read_text())
        error = json.loads(Path(inputs.error).read_text())
        model_csv = getattr(inputs, "model", None)  # model.csv: the per-configuration error table
        model_table = pd.read_csv(model_csv, keep_default_na=False, na_values=[""]) if model_csv else None
        pairs = _comparisons(inputs.comparisons)
        fits = pd.read_csv(inputs.fit) if getattr(inputs, "fit", None) else None
        _wrote(
            report.write(
                summary,
                runs,
                environment,
                error,
                list(inputs.figures),
                config,
                output[0],
                pairs,
                model_table,
                fits,
                title,
            )  # fmt: skip
        )
