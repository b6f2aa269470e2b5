"""The pipeline's analysis steps, each reading and writing files (called from rules/analysis.smk)."""

import pandas as pd

from analysis import figures, metrics, tidy


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
