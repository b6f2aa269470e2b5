"""Figures drawn straight from the summary table by column name.

Every figure is faceted by model (one panel each) with one colour per framework; the comm mode is
the line style (or bar hatch). Each is written as PDF and PNG.
"""

from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

from harness.vocabulary import BASELINE_KEYS, PHASES  # noqa: E402

# The figures' names (the pipeline's declared outputs are made from these: rules/common.smk).
FIGURES = ("throughput", "efficiency", "phases")
MODEL_FIGURES = ("model", "extrapolation")
FORMATS = ("pdf", "png")


def figure_paths(folder, names):
    """The files of the named figures in `folder`, one per format."""
    return [f"{folder}/{name}.{ext}" for name in names for ext in FORMATS]


def _named(paths, name):
    """Those of the declared output `paths` that are the figure `name`."""
    mine = [Path(p) for p in paths if Path(p).stem == name]
    if not mine:
        raise ValueError(f"no output path for figure {name!r} among {list(map(str, paths))}")
    return mine


FRAMEWORK_COLOURS = {"torch": "#d62728", "tensorflow": "#ff7f0e", "mxnet": "#1f77b4"}
COMM_STYLES = {"overlap": "-", "sequential": "--"}
PHASE_COLOURS = dict(zip(PHASES, ["#8c564b", "#e377c2", "#2ca02c", "#1f77b4", "#d62728", "#9467bd"]))


def _panels(summary, sharey=True):
    """One panel per model; with no successful run at all, one panel saying so."""
    models = sorted(summary["model"].unique()) or ["no successful runs (see summary.csv)"]
    fig, axes = plt.subplots(1, len(models), figsize=(4.2 * len(models), 3.6), sharey=sharey, squeeze=False)
    return fig, dict(zip(models, axes[0]))


def _save(fig, paths, name):
    """Write `fig` to those of `paths` (declared outputs) that are the figure `name`."""
    paths = _named(paths, name)
    fig.tight_layout()
    for path in paths:
        path.parent.mkdir(parents=True, exist_ok=True)
        fig.savefig(path, dpi=150)
    plt.close(fig)
    return paths


def lines(summary):
    """[(label, rows)]: one line per configuration but its rank count, never two configurations in
    one point. Where the same rank count comes from two placements (1 node x 2 ranks and 2 nodes x
    1 rank), each ranks-per-node is a line of its own; a setting that varies within the study (batch,
    input, threads, precision) is named in the label."""
    keys = [k for k in BASELINE_KEYS if k != "model"]
    varying = [k for k in keys[4:] if summary[k].nunique() > 1]
    out = []
    for key, g in summary.groupby(keys, sort=True):
        split = g["ranks"].duplicated().any()
        for rpn, h in (g.groupby("ranks_per_node") if split else [(None, g)]):
            named = dict(zip(keys, key))
            label = f"{named['framework']} ({named['comm']}, {named['layout']}, {named['timing']})"
            label += "".join(f", {k} {named[k]}" for k in varying)
            label += f", {rpn} per node" if split else ""
            out.append((label, h.sort_values("ranks")))
    return out


def _line_figure(summary, column, ylabel, title, ideal=None):
    ok = summary[summary["repeats_ok"] > 0]
    fig, panels = _panels(ok, sharey=False)
    for model, ax in panels.items():
        for label, g in lines(ok[ok["model"] == model]):
            yerr = [g[column] - g[f"{column}_ci_lo"], g[f"{column}_ci_hi"] - g[column]] \
                if f"{column}_ci_lo" in g else None
            fw, comm = g["framework"].iloc[0], g["comm"].iloc[0]
            ax.errorbar(g["ranks"], g[column], yerr=yerr, marker="o", capsize=3,
                        color=FRAMEWORK_COLOURS.get(fw), linestyle=COMM_STYLES.get(comm, "-"), label=label)
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
    fig.suptitle(title, fontsize=9)
    return fig


def throughput(summary, paths):
    fig = _line_figure(summary, "throughput_img_per_s", "images / s",
                       "Training throughput (mean and 95% CI over repeats)")
    return _save(fig, paths, "throughput")


def efficiency(summary, paths):
    fig = _line_figure(summary, "efficiency", "throughput(N) / (N x throughput(1))",
                       "Weak-scaling efficiency (95% CI, delta method)", ideal=lambda r: 1.0)
    return _save(fig, paths, "efficiency")


def phases(summary, paths):
    """Stacked mean phase times per iteration, one bar per framework x comm x ranks."""
    ok = summary[summary["repeats_ok"] > 0]
    fig, panels = _panels(ok, sharey=False)
    for model, ax in panels.items():
        g = ok[ok["model"] == model].sort_values(["framework", "comm", "layout", "timing", "ranks", "nodes"])
        labels = [f"{r.framework}\n{r.comm}\n{r.timing}\n{r.nodes}x{r.ranks_per_node}" for r in g.itertuples()]
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
    fig.suptitle("Time per iteration by phase (native runs: from traces; comm = exposed)", fontsize=9)
    return _save(fig, paths, "phases")


def draw_all(summary, paths):
    return [p for draw in (throughput, efficiency, phases) for p in draw(summary, paths)]


MODEL_MARKERS = {"alexnet": "s", "googlenet": "^", "resnet50": "o", "tinynet": "x"}


def model_fit(table, error, paths):
    """Predicted against measured iteration and communication time, one point per run."""
    pred = table.dropna(subset=["predicted_iteration_s"])
    fig, axes = plt.subplots(1, 2, figsize=(9, 4.2))
    for ax, (meas, col, what) in zip(axes, [("iteration_s", "predicted_iteration_s", "iteration time"),
                                           ("comm_total_s", "predicted_comm_total_s", "communication time")]):
        for r in pred.itertuples():
            ax.scatter(getattr(r, meas), getattr(r, col), color=FRAMEWORK_COLOURS.get(r.framework),
                       marker=MODEL_MARKERS.get(r.model, "o"), facecolors="none" if r.comm == "sequential" else None)
        values = pred[[meas, col]].to_numpy().ravel()
        values = values[values > 0] if len(values) else values
        if len(values):
            lo, hi = values.min() / 1.3, values.max() * 1.3
            ax.plot([lo, hi], [lo, hi], color="grey", linestyle=":")
            ax.fill_between([lo, hi], [lo * 0.9, hi * 0.9], [lo * 1.1, hi * 1.1], color="grey", alpha=0.15)
            ax.set_xscale("log")
            ax.set_yscale("log")
        key = "median_abs_error_iteration" if meas == "iteration_s" else "median_abs_error_comm_total"
        ax.set_title(f"{what}: median |error| {error.get(key, float('nan')):.1%} ({len(pred)} runs)", fontsize=9)
        ax.set_xlabel(f"measured {what} (s)")
        ax.set_ylabel(f"predicted {what} (s)")
        ax.grid(alpha=0.3)
    handles = [plt.Line2D([], [], color=c, marker="o", linestyle="", label=f) for f, c in FRAMEWORK_COLOURS.items()]
    handles += [plt.Line2D([], [], color="black", marker=m, linestyle="", markerfacecolor="none", label=n)
                for n, m in MODEL_MARKERS.items() if n in set(pred["model"])]
    axes[0].legend(handles=handles, fontsize=7, title="hollow: sequential; band: ±10%", title_fontsize=7)
    fig.suptitle("Performance model against measurement (allreduce times from this study's sweep)", fontsize=10)
    return _save(fig, paths, "model")


LINK_COLOURS = ["#1b9e77", "#d95f02", "#7570b3", "#e7298a", "#66a61e", "#e6ab02"]
FRAMEWORK_STYLES = {"torch": "-", "tensorflow": "--", "mxnet": ":"}


def extrapolation(table, paths):
    """Predicted efficiency up to many ranks for each link (overlap mode where the study has it)."""
    if "overlap" in set(table["comm"]):
        table = table[table["comm"] == "overlap"]
    fig, panels = _panels(table, sharey=True)
    colours = dict(zip(dict.fromkeys(table["link"]), LINK_COLOURS * 4))
    for model, ax in panels.items():
        for (fw, link), g in table[table["model"] == model].groupby(["framework", "link"], sort=False):
            ax.plot(g["ranks"], g["predicted_efficiency"], color=colours[link],
                    linestyle=FRAMEWORK_STYLES.get(fw, "-"), label=f"{link}, {fw}")
        ax.set_title(model)
        ax.set_xscale("log", base=2)
        ax.set_xlabel("ranks (one per node)")
        ax.set_ylim(0, 1.05)
        ax.grid(alpha=0.3)
    first = next(iter(panels.values()))
    first.set_ylabel("predicted efficiency T(1) / T(N)")
    if first.get_legend_handles_labels()[0]:
        first.legend(fontsize=6)
    fig.suptitle("PREDICTION, not measured: performance model with this study's 1-rank phase times and "
                 "assumed link parameters", fontsize=9, color="#b00000")
    return _save(fig, paths, "extrapolation")
