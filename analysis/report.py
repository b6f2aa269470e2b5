"""The pipeline's analysis steps, each reading and writing files (called from rules/analysis.smk)."""

import pandas as pd

from analysis import comm, figures, metrics, tidy


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
