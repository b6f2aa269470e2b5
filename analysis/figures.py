"""Figures drawn straight from the summary table by column name.

Every figure is faceted by model (one panel each) with one colour per framework; the comm mode is
the line style (or bar hatch). Each is written as PDF and PNG.
"""

from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

from harness.records import PHASES  # noqa: E402

FRAMEWORK_COLOURS = {"torch": "#d62728", "tensorflow": "#ff7f0e", "mxnet": "#1f77b4"}
COMM_STYLES = {"overlap": "-", "sequential": "--"}
PHASE_COLOURS = dict(zip(PHASES, ["#8c564b", "#e377c2", "#2ca02c", "#1f77b4", "#d62728", "#9467bd"]))


def _panels(summary, sharey=True):
    """One panel per model; with no successful run at all, one panel saying so."""
    models = sorted(summary["model"].unique()) or ["no successful runs (see summary.csv)"]
    fig, axes = plt.subplots(1, len(models), figsize=(4.2 * len(models), 3.6), sharey=sharey, squeeze=False)
    return fig, dict(zip(models, axes[0]))


def _save(fig, outdir, name):
    outdir = Path(outdir)
    outdir.mkdir(parents=True, exist_ok=True)
    fig.tight_layout()
    paths = [outdir / f"{name}.{ext}" for ext in ("pdf", "png")]
    for path in paths:
        fig.savefig(path, dpi=150)
    plt.close(fig)
    return paths


def _line_figure(summary, column, ylabel, title, ideal=None):
    ok = summary[summary["repeats_ok"] > 0]
    fig, panels = _panels(ok, sharey=False)
    for model, ax in panels.items():
        for (fw, comm), g in ok[ok["model"] == model].groupby(["framework", "comm"]):
            g = g.groupby("ranks", as_index=False).first().sort_values("ranks")
            yerr = [g[column] - g[f"{column}_ci_lo"], g[f"{column}_ci_hi"] - g[column]] \
                if f"{column}_ci_lo" in g else None
            ax.errorbar(g["ranks"], g[column], yerr=yerr, marker="o", capsize=3,
                        color=FRAMEWORK_COLOURS.get(fw), linestyle=COMM_STYLES.get(comm, "-"),
                        label=f"{fw} ({comm})")
        if ideal is not None:
            ranks = sorted(ok["ranks"].unique())
            ax.plot(ranks, [ideal(r) for r in ranks], color="grey", linestyle=":", label="ideal")
        ax.set_title(model)
        ax.set_xlabel("ranks")
        ax.set_xscale("log", base=2)
        ax.set_xticks(sorted(ok["ranks"].unique()), labels=[str(r) for r in sorted(ok["ranks"].unique())])
        ax.grid(alpha=0.3)
    first = next(iter(panels.values()))
    first.set_ylabel(ylabel)
    if first.get_legend_handles_labels()[0]:
        first.legend(fontsize=7)
    fig.suptitle(title, fontsize=10)
    return fig


def throughput(summary, outdir):
    fig = _line_figure(summary, "throughput_img_per_s", "images / s",
                       "Training throughput (mean and 95% CI over repeats)")
    return _save(fig, outdir, "throughput")


def efficiency(summary, outdir):
    fig = _line_figure(summary, "efficiency", "throughput(N) / (N x throughput(1))",
                       "Weak-scaling efficiency", ideal=lambda r: 1.0)
    return _save(fig, outdir, "efficiency")


def phases(summary, outdir):
    """Stacked mean phase times per iteration, one bar per framework x comm x ranks."""
    ok = summary[summary["repeats_ok"] > 0]
    fig, panels = _panels(ok, sharey=False)
    for model, ax in panels.items():
        g = ok[ok["model"] == model].sort_values(["framework", "comm", "ranks"])
        labels = [f"{r.framework}\n{r.comm}\n{r.ranks}r" for r in g.itertuples()]
        bottom = [0.0] * len(g)
        for phase in PHASES:
            values = g[f"{phase}_s"].fillna(0).tolist()
            ax.bar(range(len(g)), values, bottom=bottom, color=PHASE_COLOURS[phase], label=phase,
                   edgecolor=[FRAMEWORK_COLOURS.get(f, "black") for f in g["framework"]], linewidth=1.2)
            bottom = [b + v for b, v in zip(bottom, values)]
        ax.set_xticks(range(len(g)), labels=labels, fontsize=7)
        ax.set_title(model)
        ax.grid(alpha=0.3, axis="y")
    first = next(iter(panels.values()))
    first.set_ylabel("mean time per iteration (s)")
    if first.get_legend_handles_labels()[0]:
        first.legend(fontsize=7)
    fig.suptitle("Where an iteration's time goes (mean over ranks, iterations, repeats)", fontsize=10)
    return _save(fig, outdir, "phases")


def draw_all(summary, outdir):
    return [p for draw in (throughput, efficiency, phases) for p in draw(summary, outdir)]
