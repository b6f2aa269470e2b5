"""results/report.md: the study as a paper cites it. What was run and on what (config, hosts,
environment, versions, the harness's commit), the summary as a Markdown table and as a LaTeX table
(booktabs), the noise and failure warnings, the performance model's error, and the figures with
their captions (report/*.rst, the same captions as `snakemake --report`)."""

import json
import math
import subprocess
from pathlib import Path

import pandas as pd

from harness.paths import ROOT

CAPTIONS = ROOT / "report"
STUDY_KEYS = (
    "framework",
    "model",
    "comm",
    "comm_library",
    "layout",
    "timing",
    "nodes",
    "ranks_per_node",
    "batch_size",
    "image_size",
    "threads_per_rank",
    "precision",
    "device",
    "warmup",
    "iterations",
    "profile_iterations",
    "repeats",
    "autotune",
    "tf32",
    "hostfile",
    "emulate",
)
COLUMNS = [
    ("framework", "framework"),
    ("model", "network"),
    ("comm", "comm"),
    ("comm_library", "library"),
    ("layout", "layout"),
    ("timing", "timing"),
    ("ranks", "ranks"),
    ("throughput_img_per_s", "img/s (95% CI)"),
    ("speedup", "speedup (95% CI)"),
    ("efficiency", "efficiency (95% CI)"),
    ("iteration_s_cv", "CV"),
    ("repeats_ok", "repeats"),
]


def _num(value, digits=3):
    return "n/a" if value is None or (isinstance(value, float) and math.isnan(value)) else f"{value:.{digits}g}"


def _with_ci(row, col, digits=3):
    lo, hi = row.get(f"{col}_ci_lo"), row.get(f"{col}_ci_hi")
    text = _num(row.get(col), digits)
    if lo is not None and hi is not None and not (math.isnan(lo) or math.isnan(hi)):
        text += f" ({_num(lo, digits)}-{_num(hi, digits)})"
    return text


def table_rows(summary):
    """The summary's rows as text cells, in COLUMNS order."""
    out = []
    for row in summary[summary["repeats_ok"] > 0].to_dict("records"):
        cells = []
        for col, _ in COLUMNS:
            if col in ("throughput_img_per_s", "speedup", "efficiency"):
                cells.append(_with_ci(row, col))
            elif col == "iteration_s_cv":
                cells.append("n/a" if pd.isna(row.get(col)) else f"{row[col]:.1%}")
            else:
                cells.append(str(row[col]))
        out.append(cells)
    return out


def markdown_table(rows):
    head = [name for _, name in COLUMNS]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    return "\n".join(lines + ["| " + " | ".join(r) + " |" for r in rows])


def latex_table(rows, label="tab:dlscale"):
    def esc(text):
        return (
            text.replace("\\", r"\textbackslash{}")
            .replace("_", r"\_")
            .replace("%", r"\%")
            .replace("&", r"\&")
            .replace("#", r"\#")
        )

    head = " & ".join(esc(name) for _, name in COLUMNS) + r" \\"
    body = "\n".join(" & ".join(esc(c) for c in r) + r" \\" for r in rows)
    return (
        f"\\begin{{table}}\n\\centering\n\\begin{{tabular}}{{{'l' * 5}{'r' * (len(COLUMNS) - 5)}}}\n"
        f"\\toprule\n{head}\n\\midrule\n{body}\n\\bottomrule\n\\end{{tabular}}\n"
        f"\\caption{{Throughput (harmonic mean over repeats, 95\\% interval: summary.csv's "
        f"iteration\\_s\\_ci\\_method), speedup and efficiency "
        f"against 1 rank (95\\% delta-method interval), run-to-run coefficient of variation of the "
        f"iteration time.}}\n\\label{{{label}}}\n\\end{{table}}"
    )


def commit():
    try:
        out = subprocess.run(
            ["git", "-C", str(ROOT), "describe", "--always", "--dirty"], capture_output=True, text=True, timeout=10
        )
        return out.stdout.strip() or "unknown (not a git checkout)"
    except (OSError, subprocess.TimeoutExpired):
        return "unknown (no git)"


def caption(name):
    path = CAPTIONS / f"{name}.rst"
    return " ".join(path.read_text().split()) if path.exists() else ""


def _table(head, rows):
    """A Markdown table (cells already text; a `|` inside a cell is escaped)."""
    esc = [[str(c).replace("|", "\\|") for c in r] for r in rows]
    return "\n".join(
        ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)] + ["| " + " | ".join(r) + " |" for r in esc]
    )


def _pct(value):
    return "n/a" if value is None or pd.isna(value) else f"{value:+.1%}"


def _share(value):
    """An absolute error as a percentage, or n/a (model_error.json's null: no run to take it over)."""
    return "n/a" if value is None or pd.isna(value) else f"{value:.1%}"


def _setting(row, keys):
    return " ".join(
        f"{row[k]}" if k in ("framework", "model", "comm", "comm_library", "layout", "timing") else f"{k}={row[k]}"
        for k in keys
        if k in row
    )


def noise_table(noisy):
    """One row per configuration whose repeats vary more than the summary allows."""
    rows = [
        [
            r["framework"],
            r["model"],
            r["comm"],
            r["comm_library"],
            r["layout"],
            r["timing"],
            str(r["ranks"]),
            "n/a" if pd.isna(r.get("iteration_s_cv")) else f"{r['iteration_s_cv']:.1%}",
            "n/a" if pd.isna(r.get("iteration_s_ci_rel")) else f"±{r['iteration_s_ci_rel']:.1%}",
            "n/a" if pd.isna(r.get("repeats_needed")) else f"{int(r['repeats_needed'])}",
            f"{r['repeats_ok']}" + (f" ({r['second_pass']})" if isinstance(r.get("second_pass"), str) else ""),
            r["noise_warning"],
        ]
        for r in noisy.to_dict("records")
    ]
    return _table(
        ["framework", "network", "comm", "library", "layout", "timing", "ranks", "CV", "95% CI", "repeats for ±5%"]
        + ["repeats run (second pass)", "warning"],
        rows,
    )


def model_tables(model, model_error):
    """The performance model's error: per configuration the measured and predicted iteration time
    (medians over its repeats), the error and, where it is off by more than the tolerance, the
    measured reason; then the replays' (under `replay`). Returns Markdown lines."""
    lines = []
    if model_error.get("reason"):
        lines += [f"Nothing predicted for the study's runs: {model_error['reason']}.", ""]
    else:
        lines += [
            f"Median absolute error over {model_error['runs']} predicted runs: iteration time "
            f"{_share(model_error['median_abs_error_iteration'])}, communication time "
            f"{_share(model_error['median_abs_error_comm_total'])}.",
            "",
        ]
        libraries = model_error.get("by_library", {})
        if len(libraries) > 1:
            lines += [
                _table(
                    ["library", "runs", "iteration error", "communication error"],
                    [
                        [lib, str(e["runs"]), _share(e["median_abs_error_iteration"])]
                        + [_share(e["median_abs_error_comm_total"])]
                        for lib, e in libraries.items()
                    ],
                ),
                "",
            ]
        lines += [
            _table(
                ["configuration", "runs", "measured iteration (s)", "predicted (s)", "error", "reason"],
                _model_rows(model, model_error),
            ),
            "",
        ]
    replay = model_error.get("replay")
    if replay:
        lines += _replay_lines(replay)
    return lines


def _model_rows(model, model_error):
    """One row per predicted configuration: its runs, median measured and predicted iteration time,
    the error, and why it is off target (or that it is within the tolerance)."""
    from analysis.prediction import TOLERANCE
    from harness.vocabulary import BASELINE_KEYS as MATCH

    keys = MATCH + ["nodes", "ranks_per_node"]
    reasons = {tuple(o[k] for k in keys): o["reason"] for o in model_error.get("off_target", [])}
    rows = []
    for key, g in model.dropna(subset=["error_iteration"]).groupby(keys, sort=True):
        m = g[["iteration_s", "predicted_iteration_s", "error_iteration"]].median()
        why = reasons.get(tuple(k.item() if hasattr(k, "item") else k for k in key), f"within {TOLERANCE:.0%}")
        rows.append(
            [
                _setting(
                    dict(zip(keys, key)),
                    ["framework", "model", "comm", "comm_library", "layout", "timing", "nodes", "ranks_per_node"]
                    + ["batch_size"],
                ),
                str(len(g)),
                _num(m.iteration_s),
                _num(m.predicted_iteration_s),
                _pct(m.error_iteration),
                why,
            ]
        )
    return rows


def _replay_lines(replay):
    """The replays' error against the model and the extrapolation, and the replays off target."""
    from harness.vocabulary import BASELINE_KEYS as MATCH

    lines = [
        f"Replayed on {', '.join(map(str, replay.get('nodes', [])))} nodes: median absolute error of the "
        f"model {_share(replay.get('median_abs_error_iteration'))}, of the extrapolation "
        f"{_share(replay.get('median_abs_error_extrapolated'))} over {replay.get('replays', 0)} "
        "replayed configurations (replay.csv).",
        "",
    ]
    off = replay.get("off_target", [])
    if off:
        lines += [
            _table(
                ["configuration", "error", "reason"],
                [[_setting(o, MATCH + ["nodes"]), _pct(o.get("error_iteration")), o["reason"]] for o in off],
            ),
            "",
        ]
    return lines


def write(summary, runs, environment, model_error, figures, config, out_path, pairs, model=None):
    """figures: the figure files (PNG ones are shown), relative links from out_path's folder;
    pairs: comparisons.csv (the summary step's framework pairs); model: model.csv (per run, measured
    and predicted)."""
    out_path = Path(out_path)
    parts = _study_lines(config, runs) + _provenance_lines(environment, runs) + _results_lines(summary, runs)
    parts += _rules_lines(summary, config, pairs)
    parts += _framework_lines(pairs)
    parts += _library_lines(summary, config)
    if model_error:
        parts += ["## Performance model", ""] + model_tables(
            model if model is not None else pd.DataFrame(), model_error
        )
    parts += _figure_lines(figures, out_path)
    out_path.write_text("\n".join(parts) + "\n")
    return out_path


def _study_lines(config, runs):
    """The report's title and what was run: the study's configuration keys, hosts and launcher."""
    hosts = sorted({h for hs in runs.get("hosts", pd.Series(dtype=str)).dropna() for h in str(hs).split(",") if h})
    parts = [f"# dlscale study: `{config.get('results', 'results')}`", "", "## What was run", ""]
    parts += [f"- {k}: `{json.dumps(config[k])}`" for k in STUDY_KEYS if k in config]
    return parts + [
        f"- hosts: {', '.join(hosts) or 'n/a'}",
        f"- launcher: `{json.dumps(config.get('launcher', {}))}`",
        "",
    ]


def _provenance_lines(environment, runs):
    """The environment the runs ran in and the harness's commit."""
    parts = [
        "## Environment and provenance",
        "",
        f"- dlscale commit: `{commit()}`",
        f"- environment: `{environment.get('key', 'n/a')}` ({environment.get('variant', 'cpu')}), "
        f"Horovod {environment.get('horovod', 'n/a')}",
        f"- MPI: {environment.get('mpi', {}).get('version', 'n/a')}",
        f"- pins: {', '.join(f'{k} {v}' for k, v in environment.get('pins', {}).items())}",
    ]
    if len(runs):
        first = runs.iloc[0]
        parts.append(f"- Python {first.get('python_version', 'n/a')}; framework versions per run in `runs.csv`")
    return parts


def _results_lines(summary, runs):
    """The summary as Markdown and LaTeX tables, then the noisy configurations and the failed runs."""
    rows = table_rows(summary)
    noisy = summary[summary.get("noise_warning", pd.Series(dtype=str)).fillna("") != ""]
    failed = runs[runs["status"] != "ok"]
    parts = ["", f"## Results ({len(runs) - len(failed)} of {len(runs)} runs ok)", ""]
    if rows:
        parts += [markdown_table(rows), "", "As LaTeX (booktabs):", "", "```latex", latex_table(rows), "```", ""]
    else:
        parts += ["Nothing to show: no successful run (the failed runs and why are below).", ""]
    if len(noisy):
        parts += [
            "### Noise",
            "",
            "Configurations whose repeats vary by more than 5% (coefficient of variation of "
            "the iteration time, or the 95% interval's half-width over the mean): differences smaller than "
            "that are noise.",
            "",
            noise_table(noisy),
            "",
        ]
    if len(failed):
        parts += (
            ["### Failed runs", ""]
            + [
                f"- {r.framework} {r.model} {r.comm} {r.comm_library} nodes={r.nodes} "
                f"rpn={r.ranks_per_node} repeat={r.repeat}: {r.reasons}"
                for r in failed.itertuples()
            ]
            + [""]
        )
    return parts


def _rules_lines(summary, config, pairs):
    """How this study meets each of Hoefler and Belli's twelve rules for benchmarking parallel
    systems (SC15), from its own settings and summary: the report's methods section."""
    ok = summary[summary["repeats_ok"] > 0]
    if ok.empty or "iteration_s_ci_method" not in ok:
        return []
    return (
        ["### Methods: the twelve rules", "", "How this study meets Hoefler and Belli's rules (SC15):", ""]
        + [f"{i}. {text}" for i, text in enumerate(_rules(ok, config, pairs), 1)]
        + [""]
    )


def _rules(ok, config, pairs):
    """The twelve rules' lines, in the paper's order, for the configurations `ok` that have a run and
    the framework comparisons `pairs`."""
    from analysis.metrics import PRECISION
    from harness.config import left_out

    method = ok["iteration_s_ci_method"].fillna("")
    boot, t = int(method.str.startswith("bootstrap").sum()), int(method.str.startswith("t ").sum())
    tight = int((ok["iteration_s_ci_rel"] <= PRECISION).sum())
    differ = int((pairs["differs"] == "yes").sum()) if len(pairs) else 0
    out = left_out(config) if "framework" in config else []
    rules = [
        "speedup and efficiency are against the 1-rank run of the same framework, network, comm, library "
        "and batch (one parallel process, not the best serial code); its absolute throughput is the "
        "`ranks` 1 row of the results table",
        "the study runs every combination of its keys (What was run)"
        + (
            f"; left out: {', '.join(x['framework'] + ' with ' + x['comm_library'] for x in out)} (why: below)"
            if out
            else ""
        )  # fmt: skip
        + f"; each rank has {config.get('threads_per_rank', 'n/a')} thread(s)",
        "costs (iteration, phase times) by the arithmetic mean over repeats; the throughput, a rate, by the "
        "harmonic mean (ranks x batch / the mean iteration time), its interval the iteration time's carried over",
        "speedup, efficiency and the pairwise ratios are ratios of the summarized rates, never summarized themselves",
        f"nothing here is deterministic: every number has a 95% interval over {_repeats(ok, config)}; "
        f"{tight} of {len(ok)} configurations have their iteration time's within +-{PRECISION:.0%}",
        f"normality is tested, not assumed: Student-t in {t} configuration(s) (Shapiro-Wilk did not reject it, "
        f"or 2 repeats could not be tested), percentile bootstrap in {boot}, none in {len(ok) - t - boot} "
        "(1 repeat); per configuration in `summary.csv` (`iteration_s_ci_method`)",
        f"frameworks are compared by their throughput ratio with its interval (Framework comparisons): {differ} "
        f"of {len(pairs)} pairs differ",
        "beside the mean, each run's median and 95th percentile iteration time; far-out iterations (above the "
        f"third quartile + 3 interquartile ranges): {int(ok['outlier_iterations'].fillna(0).sum())}, kept in "
        "every mean (`run_metrics.csv`)",
        "the varying factors and their levels are What was run; software, versions and hosts are Environment "
        "and provenance, and every run's in `runs.csv`",
        f"timing `{', '.join(config.get('timing', ['n/a']))}`: an iteration's time is the slowest rank's wall time "
        f"(synchronous SGD waits for it); {config.get('warmup', 'n/a')} warm-up iterations excluded, "
        f"{_measured(ok, config)}, of which the leading ones not yet steady (above the "
        f"run's second-half median + 3 robust standard deviations) left out: "
        f"{int(ok['unsteady_iterations'].fillna(0).sum())} in all; phases from traces (native) or per-phase waits "
        "(phased): docs/concepts/phases.md",
        "upper bounds: each framework's matrix-multiply rate (`mfu` in `summary.csv`), ideal scaling in the "
        "efficiency figure, and the performance model's prediction",
        "figures plot each measured configuration with its 95% interval; lines join the rank counts of one "
        "setting only (a trend in ranks), on a log-2 axis ticked where measured",
    ]
    return rules


def _repeats(ok, config):
    """How many repeats each configuration had, and what a second pass added."""
    first, plan = config.get("repeats", "n/a"), config.get("second_pass")
    if not plan or "repeats_planned" not in ok:
        return f"{first} repeats"
    more = int((ok["repeats_planned"] > first).sum())
    return (
        f"{first} repeats, then a second pass: where the interval was wider than +-{plan['target']:.0%}, the repeats "
        f"the measured spread needed, at most {plan['max_repeats']} and {plan['max_seconds']:g} s of runs in all; "
        f"{more} configuration(s) got more repeats (`second_pass` in `summary.csv`, `second_pass.csv`)"
    )


def _measured(ok, config):
    """How many iterations each run measured, and, measured until enough, how many configurations met it."""
    samples = config.get("samples")
    if not samples:
        return f"{config.get('iterations', 'n/a')} measured per run"
    met = int((ok["runs_target_met"] == ok["repeats_ok"]).sum()) if "runs_target_met" in ok else 0
    return (
        f"at least {config['iterations']} measured per run, then on until the run's median iteration time had a 95% "
        f"interval within +-{samples['target']:.0%} on every rank (at most {samples['max_iterations']} iterations "
        f"or {samples['max_seconds']:g} s): every run met it in {met} of {len(ok)} configurations "
        "(`runs_target_met` in `summary.csv`)"
    )


def _framework_lines(ratios):
    """Each pair of frameworks in each configuration both ran (comparisons.csv): a / b throughput with
    its 95% interval."""
    if ratios.empty:
        return []
    return [
        "## Framework comparisons",
        "",
        "Each pair of frameworks in each configuration both ran: throughput a / b with its 95% delta-method "
        "interval; `differs` where the interval excludes 1 (else the difference is within the noise).",
        "",
        _table(
            ["a / b", "network", "comm", "library", "layout", "timing", "ranks", "ratio (95% CI)", "differs"],
            [
                [f"{r['a']} / {r['b']}", r["model"], r["comm"], r["comm_library"], r["layout"], r["timing"]]
                + [str(r["ranks"]), _with_ci(r, "ratio"), r["differs"]]
                for r in ratios.to_dict("records")
            ],
        ),
        "",
    ]


def _library_lines(summary, config):
    """The frameworks run through both libraries, compared configuration by configuration, and the
    framework x library pairs the study asked for that were left out, with why."""
    from analysis.metrics import library_ratios
    from harness.config import left_out

    ratios, out = library_ratios(summary), left_out(config)
    if ratios.empty and not out:
        return []
    parts = ["## Communication libraries", ""]
    if not ratios.empty:
        parts += [
            "Throughput through each framework's own library against Horovod's, same configuration "
            "(ratio native / horovod with its 95% interval; `differs` where the interval excludes 1).",
            "",
            _table(
                ["framework", "network", "comm", "layout", "timing", "ranks", "horovod img/s", "native img/s"]
                + ["native / horovod", "differs"],
                [
                    [r["framework"], r["model"], r["comm"], r["layout"], r["timing"], str(r["ranks"])]
                    + [_with_ci(r, "horovod"), _with_ci(r, "native"), _with_ci(r, "ratio"), r["differs"]]
                    for r in ratios.to_dict("records")
                ],
            ),
            "",
        ]
    if out:
        parts += ["Left out before anything ran:", ""]
        parts += [f"- {x['framework']} with {x['comm_library']}: {x['reason']}" for x in out] + [""]
    return parts


def _figure_lines(figures, out_path):
    """The PNG figures, linked relative to the report's folder, each with its caption."""
    parts = ["## Figures", ""]
    for fig in figures:
        fig = Path(fig)
        if fig.suffix == ".png":
            rel = fig.relative_to(out_path.parent) if fig.is_relative_to(out_path.parent) else fig
            parts += [f"![{fig.stem}]({rel})", "", f"*{caption(fig.stem)}* (PDF: `{rel.with_suffix('.pdf')}`)", ""]
    return parts
