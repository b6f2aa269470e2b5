"""Seaborn figures (PDF, PNG) from the tables by column: facets by network, colour by framework, style by `setting`."""

import math
import sys
import textwrap
from collections import namedtuple
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
import pandas as pd  # noqa: E402
import seaborn as sns  # noqa: E402
from matplotlib.lines import Line2D  # noqa: E402

from dlscale.core.vocabulary import BASELINE_KEYS, PHASES, seconds  # noqa: E402
from dlscale.workloads.frameworks import NAMES as FRAMEWORKS  # noqa: E402

# Okabe and Ito's palette: seaborn's "colorblind" gives two frameworks orange and vermillion, which look alike.
OKABE_ITO = ("#0072B2", "#E69F00", "#009E73", "#CC79A7", "#56B4E9", "#D55E00", "#F0E442", "#000000")
FRAMEWORK_COLOURS = dict(zip(FRAMEWORKS, OKABE_ITO))
# Each line's setting names its dimension: "library: native", not a bare word two keys share.
LABELS = {"allreduce_schedule": "schedule", "allreduce_library": "library", "layout": "layout", "timing": "timing"}
sns.set_theme(context="paper", style="whitegrid")


def _save(fig, paths, name):
    """Write `fig` to the output `paths` of figure `name`; what `problems` finds is said on stderr (the step's log)."""
    mine = [Path(p) for p in paths if Path(p).stem == name]
    if not mine:
        raise ValueError(f"no output path for figure {name!r} among {list(map(str, paths))}")
    for problem in problems(fig):
        print(f"figure {name}: {problem}", file=sys.stderr)
    for path in mine:
        path.parent.mkdir(parents=True, exist_ok=True)
        fig.savefig(path, dpi=150, bbox_inches="tight")
    plt.close(fig)
    return mine


def _data_lines(ax):
    """The number of finite points of each line `ax` draws in data coordinates (not axhline's)."""
    drawn = [line.get_data() for line in ax.get_lines() if line.get_transform() is ax.transData and line.get_visible()]
    return [int(np.isfinite(np.asarray(x, dtype=float) * np.asarray(y, dtype=float)).sum()) for x, y in drawn]


def _drawn(ax):
    """How many things `ax` draws from data: points of lines and markers, bars, bands."""
    count = sum(_data_lines(ax))
    count += sum(len(c.get_offsets()) + len(c.get_paths()) for c in ax.collections if c.get_visible())
    sized = [p for p in ax.patches if p.get_visible() and hasattr(p, "get_width")]  # bars, not axvspan's
    return count + sum(1 for p in sized if p.get_width() * p.get_height() > 0)


def _legend_lines(fig):
    """The labels of legend entries drawn as a line (a visible line style), in every legend."""
    legends = [*fig.legends, *(ax.get_legend() for ax in fig.axes if ax.get_legend())]
    entries = [(h, t.get_text()) for lg in legends for h, t in zip(lg.legend_handles, lg.get_texts())]
    return [label for h, label in entries if isinstance(h, Line2D) and h.get_linestyle() not in ("None", "", " ")]


def problems(fig):
    """What a reader cannot read in `fig`: a panel with no data, a legend line where no line of 2+ points is drawn."""
    panels = [ax for ax in fig.axes if ax.axison]
    found = [f"panel {ax.get_title() or i!r} has no data" for i, ax in enumerate(panels) if not _drawn(ax)]
    if not any(n >= 2 for ax in panels for n in _data_lines(ax)):
        found += [f"legend entry {label!r} is a line, but no line is drawn" for label in _legend_lines(fig)]
    return found


def _frameworks_in(table):
    """The frameworks `table` holds, in the registry's order (the palette's)."""
    return [f for f in FRAMEWORKS if f in set(table["framework"])]


def _nothing(paths, name, why):
    fig, ax = plt.subplots(figsize=(5, 2))
    ax.axis("off")
    ax.text(0.5, 0.5, textwrap.fill(why, 60), ha="center", va="center")
    return _save(fig, paths, name)


def _share(value):
    """A relative error as a percentage, or n/a (model_error.json's null)."""
    return "n/a" if value is None or math.isnan(value) else f"{value:.1%}"


def lines(summary):
    """The summary with a `setting` column telling a framework's lines apart: the library always (it differs by
    framework), the others where the study varies them, ranks per node where two placements give one rank count."""
    shown = ["allreduce_library"] + [
        k for k in BASELINE_KEYS if k not in ("model", "framework", "allreduce_library") and summary[k].nunique() > 1
    ]
    out = summary.copy()
    out["setting"] = [", ".join(f"{LABELS.get(k, k)}: {getattr(r, k)}" for k in shown) for r in summary.itertuples()]
    line = ["model", "framework", "setting"]
    split = out.duplicated(line + ["ranks"], keep=False).groupby([out[k] for k in line]).transform("any")
    out.loc[split, "setting"] += out.loc[split, "ranks_per_node"].map(", ranks per node: {}".format)
    return out.sort_values(["model", "framework", "setting", "ranks"])


# A line figure: summary.csv's `column` against ranks, `ideal` dotted, `why` no successful configuration has one.
Line = namedtuple("Line", ["column", "ylabel", "title", "name", "ideal", "why"], defaults=(None, None))


def _by_framework(data, col="model", height=3.2, aspect=1.1, **kwargs):
    hue = {"hue": "framework", "palette": FRAMEWORK_COLOURS, "hue_order": _frameworks_in(data)}
    return sns.relplot(data=data, col=col, **hue, height=height, aspect=aspect, **kwargs)


def _line_figure(summary, line, paths):
    """Mean `line.column` against ranks, with the table's own 95% interval as the error bar."""
    ran = summary[summary["repeats_ok"] > 0]
    ok = lines(ran.dropna(subset=[line.column]))
    if ok.empty:
        why = line.why or f"no configuration has a value of {line.column} (see summary.csv)"
        return _nothing(paths, line.name, "no successful run (see summary.csv)" if ran.empty else why)
    ok = _dodged(ok)
    line_kws = {"style": "setting", "units": "setting", "estimator": None, "markers": True, "dashes": True}
    grid = _by_framework(ok, kind="line", x="drawn_at", y=line.column, **line_kws, facet_kws={"sharey": False})
    _dress_line_axes(grid, ok, line.column, line.ideal)
    grid.set_axis_labels("ranks", line.ylabel)
    grid.set_titles("{col_name}")
    grid.figure.suptitle(line.title, y=1.03)
    return _save(grid.figure, paths, line.name)


DODGE = 0.05  # of a doubling of ranks, between two frameworks' points at one rank count


def _dodged(ok):
    """`drawn_at`: each framework's points a little apart per rank count, so a line on another's shows its interval."""
    drawn = _frameworks_in(ok)
    shift = {f: DODGE * (i - (len(drawn) - 1) / 2) for i, f in enumerate(drawn)}
    return ok.assign(drawn_at=ok["ranks"] * 2 ** ok["framework"].map(shift))


def _dress_line_axes(grid, ok, column, ideal):
    """Each facet's 95% intervals as error bars, the `ideal` dotted, and ranks on a log-2 axis ticked where measured."""
    ranks = sorted(ok["ranks"].unique())
    for model, ax in grid.axes_dict.items():
        for (fw, _), g in ok[ok["model"] == model].groupby(["framework", "setting"]):
            if f"{column}_ci_lo" in g:
                # an unbounded end (a rate whose time interval reaches zero) is left undrawn
                ends = (g[column] - g[f"{column}_ci_lo"], g[f"{column}_ci_hi"] - g[column])
                yerr = [end.replace(math.inf, math.nan) for end in ends]
                colour = FRAMEWORK_COLOURS.get(fw)
                ax.errorbar(g["drawn_at"], g[column], yerr=yerr, fmt="none", ecolor=colour, capsize=3, linewidth=0.8)
        if ideal is not None:
            ax.axhline(ideal, color="grey", linestyle=":", linewidth=1)
        ax.set_xscale("log", base=2)
        ax.set_xticks(ranks, labels=[str(r) for r in ranks])


def throughput(summary, paths):
    title = "Training throughput (mean and 95% CI over repeats)"
    return _line_figure(summary, Line("throughput_img_per_s", "images / s", title, "throughput"), paths)


def efficiency(summary, paths):
    title = "Weak-scaling efficiency (95% CI on the log scale)"
    why = "no successful 1-rank run to compare with (see summary.csv)"
    line = Line("efficiency", "throughput(N) / (N x throughput(1))", title, "efficiency", ideal=1.0, why=why)
    return _line_figure(summary, line, paths)


def phases(summary, paths):
    """Mean phase times per iteration with 95% intervals, one row per configuration, each phase on its own axis."""
    ok = summary[summary["repeats_ok"] > 0]
    if ok.empty:
        return _nothing(paths, "phases", "no successful runs (see summary.csv)")
    ok = lines(ok.dropna(subset=[seconds(p) for p in PHASES], how="all"))
    if ok.empty:
        traces = "a native run has them from its traces only, and profile_iterations 0 traces none"
        return _nothing(paths, "phases", f"no configuration has phase times ({traces})")
    ok = _configuration_rows(ok)
    models = list(dict.fromkeys(ok["model"]))
    rows = ok.groupby("model").size().max()
    size = (2.1 * (len(PHASES) + 1) + 3, len(models) * (0.9 + 0.28 * rows))
    fig, axes = plt.subplots(len(models), len(PHASES) + 1, squeeze=False, sharey="row", figsize=size)
    for grid_row, model in zip(axes, models):
        mine = ok[ok["model"] == model]
        for ax, column in zip(grid_row, [seconds(p) for p in PHASES] + ["iteration_s"]):
            _phase_panel(ax, mine, column)
        grid_row[0].set_ylabel(model)
    title = "Time per iteration by phase, each on its own scale (native runs: from traces; comm = exposed)"
    fig.suptitle(f"{title}\nrows: framework, nodes x ranks per node (setting); bars: 95% interval over repeats", y=1.02)
    fig.tight_layout()
    return _save(fig, paths, "phases")


def _framework_order(column):
    """Frameworks in the registry's order (the palette's), other columns as they are."""
    return column.map(FRAMEWORKS.index) if column.name == "framework" else column


def _configuration_rows(ok):
    """`lines`' table in figure rows' order (frameworks in the palette's, then ranks), each named in `configuration`."""
    ok = ok.sort_values(["model", "framework", "ranks"], key=_framework_order)
    names = [f"{r.framework}, {r.nodes}x{r.ranks_per_node} ({r.setting})" for r in ok.itertuples()]
    return ok.assign(configuration=names)


def _xerr(mean, lo, hi):
    """An interval as errorbar's xerr; None (left undrawn) where an end is missing or unbounded."""
    if not all(pd.notna(v) and math.isfinite(v) for v in (mean, lo, hi)):
        return None
    return [[max(mean - lo, 0)], [max(hi - mean, 0)]]


def _phase_panel(ax, rows, column):
    """One phase (or the whole iteration) of a network's rows on its own axis (io readable beside backward)."""
    y = list(range(len(rows)))[::-1]
    for yi, r in zip(y, rows.to_dict("records")):
        mean, lo, hi = (r.get(f"{column}{end}", math.nan) for end in ("", "_ci_lo", "_ci_hi"))
        colour = FRAMEWORK_COLOURS.get(r["framework"], "black")
        drawn_at = 0.0 if pd.isna(mean) else mean
        ax.errorbar([drawn_at], [yi], xerr=_xerr(mean, lo, hi), fmt="o", ms=4, capsize=2, color=colour)
    ax.set_yticks(y, rows["configuration"])
    ax.set_xlim(left=0)
    ax.set_title(column.removesuffix("_s") if column != "iteration_s" else "whole iteration")
    ax.set_xlabel("s")


def input_rate(summary, paths):
    """Per configuration the loader's rate per rank against what training takes (95% CIs): input-bound where equal."""
    if "loader_img_per_s" not in summary or summary["loader_img_per_s"].isna().all():
        return _nothing(paths, "input", "synthetic data: no loader (data: {kind: images} reads JPEGs)")
    ok = _configuration_rows(lines(summary[summary["repeats_ok"] > 0].dropna(subset=["loader_img_per_s"])))
    models = list(dict.fromkeys(ok["model"]))
    height = 1.2 + 0.3 * ok.groupby("model").size().max()
    fig, axes = plt.subplots(1, len(models), figsize=(5.2 * len(models), height), squeeze=False, sharey=False)
    for ax, model in zip(axes[0], models):
        _input_panel(ax, ok[ok["model"] == model])
        ax.set_title(model)
    axes[0][0].set_ylabel("framework, nodes x ranks per node (setting)")
    fig.legend(handles=_input_legend(ok), loc="center left", bbox_to_anchor=(1.0, 0.5), frameon=False)
    fig.suptitle("Input: can each loader feed its trainer? (per rank; input-bound where the marks meet)", y=1.02)
    fig.tight_layout()
    return _save(fig, paths, "input")


INPUT_MARKS = {"loader alone": "o", "training takes": "X"}


def _input_panel(ax, rows):
    """One network's rows: the loader's rate (circle) and training's (cross), 95% intervals as bars."""
    y = list(range(len(rows)))[::-1]
    for yi, r in zip(y, rows.itertuples()):
        colour = FRAMEWORK_COLOURS.get(r.framework, "black")
        per_rank = [getattr(r, f"throughput_img_per_s{end}") / r.ranks for end in ("", "_ci_lo", "_ci_hi")]
        loader = (r.loader_img_per_s, *(getattr(r, f"loader_img_per_s_ci_{end}", math.nan) for end in ("lo", "hi")))
        ax.plot([per_rank[0], loader[0]], [yi, yi], color="lightgrey", linewidth=2, zorder=1)
        for (mean, lo, hi), mark in zip((loader, per_rank), INPUT_MARKS.values()):
            ax.errorbar([mean], [yi], xerr=_xerr(mean, lo, hi), fmt=mark, color=colour, capsize=2, ms=6, zorder=2)
    ax.set_xscale("log")
    ax.set_yticks(y, rows["configuration"])
    ax.set_xlabel("images / s per rank (log; bars: 95% interval)")


def _input_legend(ok):
    """Markers for the two rates, colours for the frameworks drawn (markers only: no line is drawn)."""
    marks = [Line2D([], [], marker=m, color="black", linestyle="None", label=k) for k, m in INPUT_MARKS.items()]
    drawn = _frameworks_in(ok)
    return marks + [Line2D([], [], marker="s", color=FRAMEWORK_COLOURS[f], linestyle="None", label=f) for f in drawn]


def comparisons(pairs, paths):
    """comparisons.csv's framework pairs: the block model's a / b and simultaneous 95% interval, coloured by verdict."""
    pairs = pairs[pairs["dimension"] == "framework"] if len(pairs) else pairs
    if pairs.empty:
        return _nothing(paths, "comparisons", "no configuration was run by two frameworks")
    pairs = pairs.sort_values(["model", "ranks", "a", "b"])
    varying = [k for k in ("allreduce_schedule", "layout", "timing", "batch_size", "nodes") if pairs[k].nunique() > 1]
    labels = [
        ", ".join([r.model, f"{r.ranks} rank(s)"] + [f"{LABELS.get(k, k)}: {getattr(r, k)}" for k in varying])
        + f": {r.a} ({r.a_library}) / {r.b} ({r.b_library})"
        for r in pairs.itertuples()
    ]
    fig, ax = plt.subplots(figsize=(7, 0.9 + 0.28 * len(pairs)))
    y = list(range(len(pairs)))[::-1]
    lo = (pairs["ratio"] - pairs["ratio_ci_lo"]).clip(lower=0).fillna(0)
    hi = (pairs["ratio_ci_hi"] - pairs["ratio"]).clip(lower=0).fillna(0)
    pairs = pairs.assign(y=y, lo=lo, hi=hi)
    shown = {"one faster": OKABE_ITO[5], "equal": OKABE_ITO[0], "unresolved": "grey"}
    verdicts = pairs["verdict"].replace({"a faster": "one faster", "b faster": "one faster"})
    for verdict, colour in shown.items():
        part = pairs[verdicts == verdict]
        if len(part):
            xerr = [part["lo"], part["hi"]]
            label = f"verdict: {verdict}"
            ax.errorbar(part["ratio"], part["y"], xerr=xerr, fmt="o", color=colour, capsize=2, ms=4, label=label)
    ax.axvline(1.0, color="black", linewidth=0.8)
    ax.axvspan(0.95, 1.05, color=OKABE_ITO[0], alpha=0.1, linewidth=0)
    ax.set_xscale("log", base=2)
    _ratio_ticks(ax, pairs["ratio_ci_lo"].tolist() + pairs["ratio_ci_hi"].tolist() + pairs["ratio"].tolist())
    ax.set_yticks(y, labels)
    ax.set_xlabel("throughput ratio a / b, block model (simultaneous 95% interval; band: equal within ±5%)")
    ax.set_title("Frameworks compared (verdicts at 5% per configuration, Tukey)")
    ax.legend(loc="upper left", bbox_to_anchor=(1.0, 1.0), frameon=False)
    return _save(fig, paths, "comparisons")


def _ratio_ticks(ax, values):
    """Ratio ticks over the values' range, labelled as numbers; the axis reaches at least 0.8-1.25."""
    finite = [v for v in values if pd.notna(v) and v > 0 and math.isfinite(v)]
    lo, hi = min(finite + [0.8]), max(finite + [1.25])
    ax.set_xlim(lo / 1.05, hi * 1.05)
    ticks = [t for t in (0.25, 0.33, 0.5, 0.67, 0.8, 1.0, 1.25, 1.5, 2.0, 3.0, 4.0) if lo / 1.05 <= t <= hi * 1.05]
    ax.set_xticks(ticks, [f"{t:g}" for t in ticks])
    ax.xaxis.set_minor_locator(matplotlib.ticker.NullLocator())


def draw_all(summary, pairs, paths):
    """Every study figure; `pairs`: comparisons.csv (the summary step's framework pairs)."""
    drawn = [p for draw in (throughput, efficiency, phases, input_rate) for p in draw(summary, paths)]
    return drawn + comparisons(pairs, paths)


def model_fit(table, error, paths):
    """Predicted against measured iteration and communication time, one point per run."""
    pred = table.dropna(subset=["predicted_iteration_s"])
    if pred.empty:
        return _nothing(paths, "model", f"nothing predicted: {error.get('reason') or 'no run with 2 or more ranks'}")
    what = {"iteration_s": "iteration time", "comm_total_s": "communication time"}
    parts = []
    for m, name in what.items():
        share = _share(error.get(f"median_abs_error_{m.removesuffix('_s')}"))
        quantity = f"{name}: median |error| {share} ({len(pred)} runs)"
        parts.append(pred.assign(quantity=quantity, measured=pred[m], predicted=pred[f"predicted_{m}"]))
    scatter = {"x": "measured", "y": "predicted", "style": "model", "facet_kws": {"sharex": False, "sharey": False}}
    grid = _by_framework(pd.concat(parts), col="quantity", height=3.6, aspect=1, kind="scatter", **scatter)
    for ax in grid.axes.flat:
        lo, hi = ax.get_xlim()
        lo, hi = min(lo, ax.get_ylim()[0]), max(hi, ax.get_ylim()[1])
        ax.plot([lo, hi], [lo, hi], color="grey", linestyle=":")
        ax.fill_between([lo, hi], [lo * 0.9, hi * 0.9], [lo * 1.1, hi * 1.1], color="grey", alpha=0.15)
    grid.set_axis_labels("measured (s)", "predicted (s)")
    grid.set_titles("{col_name}")
    grid.figure.suptitle("Performance model against measurement (band: ±10%)", y=1.03)
    return _save(grid.figure, paths, "model")


def replay(table, error, paths):
    """Replayed iteration time on N nodes by the model's (sweep on those nodes) and the extrapolation's (ring fit)."""
    ok = table.dropna(subset=["iteration_s"])
    if ok.empty:
        why = "; ".join(sorted(set(table["failure"].dropna()) - {""})) or "no replay in this study (config key replay)"
        return _nothing(paths, "replay", why[:120])
    sources = {"replayed (measured)": "iteration_s", "model (sweep on these nodes)": "predicted_iteration_s"}
    sources["extrapolation (ring fit)"] = "extrapolated_iteration_s"
    long = pd.concat([ok.assign(source=source, seconds=ok[column]) for source, column in sources.items()])
    long["configuration"] = long["framework"] + " " + long["allreduce_schedule"]
    facets = {"col": "model", "row": "configuration", "height": 2.6, "aspect": 1.3, "facet_kws": {"sharey": False}}
    grid = sns.relplot(
        data=long, kind="line", x="nodes", y="seconds", hue="source", style="source", markers=True, **facets
    )
    for ax in grid.axes.flat:
        ax.set_xscale("log", base=2)
        ax.set_ylim(bottom=0)
    grid.set_axis_labels("nodes (one rank each)", "iteration (s)")
    grid.set_titles("{row_name}, {col_name}")
    model, extrapolated = (_share(error.get(f"median_abs_error_{k}")) for k in ("iteration", "extrapolated"))
    medians = f"median |error| {model} (extrapolation {extrapolated}), {error.get('replays', 0)} replays"
    grid.figure.suptitle(f"Replay against the model: {medians}", y=1.02)
    return _save(grid.figure, paths, "replay")


def extrapolation(table, paths, why="no 1-rank run to extrapolate from", replays=None, checked_to=None):
    """Predicted efficiency per link (overlap mode where run), shaded beyond the `checked_to` ranks checked on."""
    if "overlap" in set(table["allreduce_schedule"]):
        table = table[table["allreduce_schedule"] == "overlap"]
    if table.empty:
        return _nothing(paths, "extrapolation", f"nothing to extrapolate: {why}")
    grid = _by_framework(table, kind="line", x="ranks", y="predicted_efficiency", style="link")
    banded = table["link"].iloc[0]  # the config's first link
    for ax, network in zip(grid.axes.flat, grid.col_names):
        ax.set_xscale("log", base=2)
        ax.set_ylim(0, 1.05)
        _error_bands(ax, table[table["model"] == network], banded)
        if checked_to:
            ax.axvspan(checked_to, table["ranks"].max(), color="grey", alpha=0.12, linewidth=0)
            ax.text(checked_to * 1.1, 0.03, f"beyond the {checked_to} ranks the model was checked on", fontsize=6)
    grid.set_axis_labels("ranks (one per node)", "predicted efficiency T(1) / T(N)")
    grid.set_titles("{col_name}")
    title = "PREDICTION, not measured: performance model with this study's 1-rank phase times and assumed link "
    title += "parameters"
    if "model_error" in table:
        title += f"\nbands ({banded}): the 1-rank runs' 95% interval, widened by the model's median error on this "
        title += "study's runs"
    title += _checked(replays)
    grid.figure.suptitle(title, y=1.0 + 0.05 * (title.count("\n") + 1), color="#b00000")
    return _save(grid.figure, paths, "extrapolation")


def _error_bands(ax, table, link):
    """Each framework's band of the model's measured error, on `link` only: twenty bands of 10-45% would hide lines."""
    if "predicted_efficiency_lo" not in table:
        return
    drawn = table[table["link"] == link].dropna(subset=["model_error"])
    for framework, line in drawn.groupby("framework"):
        line = line.sort_values("ranks")
        low, high = line["predicted_efficiency_lo"], line["predicted_efficiency_hi"].clip(upper=1.05)
        ax.fill_between(line["ranks"], low, high, color=FRAMEWORK_COLOURS[framework], alpha=0.12, lw=0)


def _checked(replays):
    """Under the extrapolation's title: its error against the replays, per node count."""
    if replays is None or "error_extrapolated" not in replays:
        return ""
    ok = replays.dropna(subset=["error_extrapolated"])
    if ok.empty:
        return ""
    errors = ok.groupby("nodes")["error_extrapolated"].agg(lambda e: e.loc[e.abs().idxmax()])
    return "\nchecked on this study's cluster (its smallest multi-node sweep's ring fit against replays), error: " + (
        ", ".join(f"{e:+.1%} at {n} nodes" for n, e in errors.items())
    )
