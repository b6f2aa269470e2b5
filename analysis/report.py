"""The pipeline's analysis steps, each reading and writing files (called from rules/analysis.smk)."""

import json

import pandas as pd

from analysis import comm, figures, metrics, model, tidy


def write_tables(status_paths, tidy_path, runs_path):
    table, runs = tidy.build(status_paths)
    table.to_csv(tidy_path, index=False)
    runs.to_csv(runs_path, index=False)


def write_summary(tidy_path, runs_path, out_path):
    table = pd.read_csv(tidy_path)
    status = pd.read_csv(runs_path, keep_default_na=False)
    runs = metrics.run_table(table)
    metrics.summarize(runs, status).to_csv(out_path, index=False)


def write_figures(summary_path, outdir):
    return figures.draw_all(pd.read_csv(summary_path), outdir)


def write_comm(sweeps, sweep_path, fit_path):
    """sweeps: {path: (nodes, ranks_per_node)}."""
    table, fits = comm.tables([(path, n, r) for path, (n, r) in sweeps.items()])
    table.to_csv(sweep_path, index=False)
    fits.to_csv(fit_path, index=False)


def write_model(tidy_path, runs_path, sweep_path, fit_path, extrapolate, out_dir, figure_dir):
    """model.csv (measured and predicted communication and iteration time per run), model_error.json,
    gradients.csv (tensors and bytes per framework and model), extrapolation.csv, and figures."""
    runs = metrics.run_table(pd.read_csv(tidy_path))
    status = pd.read_csv(runs_path, keep_default_na=False, na_values=[""])
    table, bases = model.model_table(runs, status, pd.read_csv(sweep_path), pd.read_csv(fit_path))
    error = model.model_error(table)
    table.to_csv(f"{out_dir}/model.csv", index=False)
    with open(f"{out_dir}/model_error.json", "w") as fh:
        json.dump(error, fh, indent=2)
    grads = status[status["status"] == "ok"].dropna(subset=["grad_bytes"])
    (grads.groupby(["framework", "model"], as_index=False)[["grad_tensors", "grad_bytes"]].first()
     .astype({"grad_tensors": int, "grad_bytes": int}).to_csv(f"{out_dir}/gradients.csv", index=False))
    ext = model.extrapolate(bases, extrapolate["links"], extrapolate["max_ranks"])
    ext.to_csv(f"{out_dir}/extrapolation.csv", index=False)
    figures.model_fit(table, error, figure_dir)
    figures.extrapolation(ext, figure_dir)
