"""results/report.md: the study as a paper cites it, from what ran on what to the figures and their captions."""

import dataclasses
import json
import math
import time
from pathlib import Path

import pandas as pd

from dlscale.analysis import caveats, comparisons, sequential
from dlscale.analysis.metrics import MIN_BOOTSTRAP, PRECISION
from dlscale.analysis.prediction import TOLERANCE
from dlscale.core import hardware, version
from dlscale.core.paths import WORKFLOW
from dlscale.core.processes import CORES_ALLOWANCE
from dlscale.core.vocabulary import BASELINE_KEYS as MATCH
from dlscale.core.vocabulary import MATRIX_KEYS
from dlscale.runtime.config import left_out
from dlscale.runtime.design import settings
from dlscale.workloads import frameworks

# The environment's pins that run the pipeline and the analysis (not the measured software, nor linters).
TOOLING = ("snakemake", "pandas", "scipy", "matplotlib", "seaborn", "pillow", "mpi4py")
STUDY_KEYS = ("framework", "model", "allreduce_schedule", "allreduce_library", "layout", "timing", "nodes")
STUDY_KEYS += ("ranks_per_node", "batch_size", "image_size", "threads_per_rank", "precision", "device", "warmup")
STUDY_KEYS += ("iterations", "profile_iterations", "repeats", "autotune", "tf32", "hostfile", "emulate")
# The summary table's identity columns: shown only where they vary.
IDENTITY = ("framework", "model", "allreduce_schedule", "allreduce_library", "layout", "timing", "ranks")
COLUMNS = [("framework", "framework"), ("model", "network"), ("allreduce_schedule", "schedule")]
COLUMNS += [("allreduce_library", "library"), ("layout", "layout"), ("timing", "timing"), ("ranks", "ranks")]
COLUMNS += [("throughput_img_per_s", "img/s [95% CI]"), ("speedup", "speedup [95% CI]")]
COLUMNS += [("efficiency", "efficiency [95% CI]"), ("iteration_s_cv", "CV"), ("repeats_ok", "repeats")]
_LATEX = str.maketrans({"\\": r"\textbackslash{}", "_": r"\_", "%": r"\%", "&": r"\&", "#": r"\#"})


def _num(value, digits=3):
    return "n/a" if value is None or (isinstance(value, float) and math.isnan(value)) else f"{value:.{digits}g}"


def _bound(value, digits=3):
    """An interval's bound with the digits that tell it from 1 where it is not ("[1, 1.47]" reads as touching 1)."""
    text = _num(value, digits)
    while text == "1" and value != 1 and digits < 6:
        digits += 1
        text = _num(value, digits)
    return text


def _with_ci(row, col, digits=3):
    """A value as "v [lo, hi]" or "v [unresolved]" where repeats gave no bound (a time interval at 0 bounds no rate)."""
    lo, hi = row.get(f"{col}_ci_lo"), row.get(f"{col}_ci_hi")
    text = _num(row.get(col), digits)
    if lo is not None and hi is not None and not (pd.isna(lo) or pd.isna(hi)):
        return f"{text} [{_bound(lo, digits)}, {_bound(hi, digits)}]"
    return text + (" [unresolved]" if (row.get("repeats_ok") or 0) >= 2 and row.get("ranks") != 1 else "")


def _shown(summary):
    """COLUMNS less the identity columns that hold one value in every row (said once above the table)."""
    ok = summary[summary["repeats_ok"] > 0]
    return [(c, n) for c, n in COLUMNS if c not in IDENTITY or ok[c].astype(str).nunique() > 1]


def constants(summary):
    """The identity columns that hold one value in every configuration: "allreduce_schedule overlap, layout best"."""
    ok = summary[summary["repeats_ok"] > 0]
    return ", ".join(f"{n} {ok[c].iloc[0]}" for c, n in COLUMNS if c in IDENTITY and ok[c].astype(str).nunique() == 1)


def table_rows(summary, columns=None):
    """The summary's rows as text cells, in `columns` order (default: the varying ones, `_shown`)."""
    columns = columns or _shown(summary)
    return [[_cell(row, col) for col, _ in columns] for row in summary[summary["repeats_ok"] > 0].to_dict("records")]


def _cell(row, col):
    if col in ("throughput_img_per_s", "speedup", "efficiency"):
        return _with_ci(row, col)
    if col == "iteration_s_cv":
        return "n/a" if pd.isna(row.get(col)) else f"{row[col]:.1%}"
    return str(row[col])


def markdown_table(rows, columns=COLUMNS):
    head = [name for _, name in columns]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    return "\n".join(lines + ["| " + " | ".join(r) + " |" for r in rows])


def latex_table(rows, label="tab:dlscale", columns=COLUMNS):
    align = "".join("l" if c in IDENTITY and c != "ranks" else "r" for c, _ in columns)  # text left, numbers right
    head = " & ".join(name.translate(_LATEX) for _, name in columns) + r" \\"
    body = "\n".join(" & ".join(c.translate(_LATEX) for c in r) + r" \\" for r in rows)
    return (
        f"\\begin{{table}}\n\\centering\n\\begin{{tabular}}{{{align}}}\n"
        f"\\toprule\n{head}\n\\midrule\n{body}\n\\bottomrule\n\\end{{tabular}}\n"
        f"\\caption{{Throughput (harmonic mean over repeats, 95\\% interval: summary.csv's "
        f"iteration\\_s\\_ci\\_method), speedup and efficiency against 1 rank (95\\% interval on the log scale), "
        f"run-to-run coefficient of variation of the iteration time.}}\n\\label{{{label}}}\n\\end{{table}}"
    )


def caption(name):
    path = WORKFLOW / "report" / f"{name}.rst"
    return " ".join(path.read_text().split()) if path.exists() else ""


def _table(head, rows):
    """A Markdown table of `head` (names) and `rows` (any cells; a `|` inside a cell is escaped)."""
    return markdown_table([[str(c).replace("|", "\\|") for c in r] for r in rows], [(name, name) for name in head])


def _share(value, spec=".1%"):
    """A share as a percentage (`spec`), or n/a (model_error.json's null: no run to take it over)."""
    return "n/a" if value is None or pd.isna(value) else f"{value:{spec}}"


def _setting(row, keys):
    """`keys`' values of `row`, the identity columns' bare, the others as key=value."""
    return " ".join(f"{row[k]}" if k in IDENTITY[:-1] else f"{k}={row[k]}" for k in keys if k in row)


def noise_table(noisy):
    """Per configuration whose repeats vary more than the summary allows: CV, interval, repeats run and needed."""
    varying = [(c, n) for c, n in COLUMNS if c in IDENTITY and noisy[c].astype(str).nunique() > 1] or COLUMNS[:2]
    rows = []
    for r in noisy.to_dict("records"):
        ci = "n/a" if pd.isna(r.get("iteration_s_ci_rel")) else f"±{r['iteration_s_ci_rel']:.1%}"
        second = f" ({r['second_pass']})" if isinstance(r.get("second_pass"), str) else ""
        needed = "n/a" if pd.isna(r.get("repeats_needed")) else f"{int(r['repeats_needed'])}"
        cells = [_share(r.get("iteration_s_cv")), ci, f"{r['repeats_ok']}{second}", needed]
        rows.append([str(r[c]) for c, _ in varying] + cells)
    return _table([n for _, n in varying] + ["CV", "95% CI of the mean", "repeats run", "repeats for ±5%"], rows)


def model_tables(model, model_error):
    """The performance model's error (Markdown lines): overall, per library, per configuration, then the replays'."""
    if model_error.get("reason"):
        lines = [f"Nothing predicted for the study's runs: {model_error['reason']}.", ""]
    else:
        errors = ("median_abs_error_iteration", "median_abs_error_comm_total")
        iteration, comm = (_share(model_error[k]) for k in errors)
        median = f"Median absolute error over {model_error['runs']} predicted runs: iteration time {iteration}, "
        lines = [median + f"communication time {comm}.", ""]
        libraries = model_error.get("by_library", {})
        if len(libraries) > 1:
            cells = [[lib, str(e["runs"])] + [_share(e[k]) for k in errors] for lib, e in libraries.items()]
            lines += [_table(["library", "runs", "iteration error", "communication error"], cells), ""]
        head = ["configuration", "runs", "measured iteration (s)", "predicted (s)", "compute slowdown"]
        lines += [_table(head + ["error (95% interval)", "reason"], _model_rows(model, model_error)), ""]
    return lines + _replay_lines(model_error.get("replay"))


def _model_rows(model, model_error):
    """Per predicted configuration: runs, median measured and predicted time, error [95% CI], why off target."""
    keys = MATCH + ["nodes", "ranks_per_node"]
    shown = list(MATRIX_KEYS[: MATRIX_KEYS.index("batch_size") + 1])
    reasons = {tuple(o[k] for k in keys): o["reason"] for o in model_error.get("off_target", [])}
    rows = []
    for key, g in model.dropna(subset=["error_iteration"]).groupby(keys, sort=True):
        m = g[["iteration_s", "predicted_iteration_s", "error_iteration"]].median()
        slowdown = (
            f"x{g['compute_slowdown'].median():.3g} ({g['slowdown_source'].iloc[0]})" if "compute_slowdown" in g else ""
        )
        why = reasons.get(tuple(k.item() if hasattr(k, "item") else k for k in key), f"within {TOLERANCE:.0%}")
        lo, hi = (g["error_ci_lo"].iloc[0], g["error_ci_hi"].iloc[0]) if "error_ci_lo" in g else (math.nan,) * 2
        error = _share(m.error_iteration, "+.1%") + ("" if pd.isna(lo) else f" [{lo:+.1%}, {hi:+.1%}]")
        times = [_num(m.iteration_s), _num(m.predicted_iteration_s)]
        rows.append([_setting(dict(zip(keys, key)), shown), str(len(g)), *times, slowdown, error, why])
    return rows


def _replay_lines(replay):
    """The replays' error against the model and the extrapolation, and the replays off target."""
    if not replay:
        return []
    said = f"Replayed on {', '.join(map(str, replay.get('nodes', [])))} nodes: median absolute error of the "
    said += f"model {_share(replay.get('median_abs_error_iteration'))}, of the extrapolation "
    said += f"{_share(replay.get('median_abs_error_extrapolated'))} over {replay.get('replays', 0)} "
    said += "replayed configurations (replay.csv)."
    off = replay.get("off_target", [])
    cells = [[_setting(o, MATCH + ["nodes"]), _share(o.get("error_iteration"), "+.1%"), o["reason"]] for o in off]
    return [said, ""] + ([_table(["configuration", "error", "reason"], cells), ""] if off else [])


@dataclasses.dataclass(frozen=True)
class Tables:
    """A finished study's tables (`pairs`: comparisons.csv, `fits`: allreduce_fit.csv, `looks`: sequential.csv)."""

    summary: pd.DataFrame
    runs: pd.DataFrame
    environment: dict
    model_error: dict
    pairs: pd.DataFrame
    model: pd.DataFrame | None = None
    fits: pd.DataFrame | None = None
    blocks: pd.DataFrame | None = None
    looks: pd.DataFrame | None = None


def write(tables, config, figures, out_path, title=None):
    """The report of `tables` (Tables) at `out_path`; `figures`: the figure files (PNG ones are shown)."""
    t, out_path = tables, Path(out_path)
    parts = _study_lines(config, t.runs, title) + _hardware_lines(t.runs, config, t.fits)
    parts += _provenance_lines(t.environment, t.runs) + caveats.lines(t.summary, t.runs, t.model_error, t.pairs)
    parts += _results_lines(t.summary, t.runs) + _rules_lines(t.summary, config, t.pairs)
    parts += _framework_lines(t.pairs, t.blocks) + _sequential_lines(t.looks, config) + _library_lines(t.pairs, config)
    if t.model_error:
        model = t.model if t.model is not None else pd.DataFrame()
        parts += ["## Performance model", ""] + model_tables(model, t.model_error)
    parts += _figure_lines(figures, out_path)
    out_path.write_text("\n".join(parts) + "\n")
    return out_path


def _dates(runs):
    """ "2026-11-26 14:02 to 14:25 UTC": when the study's runs started (runs.csv `started`)."""
    started = sorted(t for t in runs.get("started", pd.Series(dtype=str)).fillna("").astype(str) if t)
    if not started:
        return "n/a (runs made before their start time was recorded)"
    first, last = (t.replace("T", " ").removesuffix("Z")[:16] for t in (started[0], started[-1]))
    return f"{first} to {last if last[:10] != first[:10] else last[11:]} UTC"


def _study_lines(config, runs, title):
    """The report's title, its date, and what was run: the varying keys, the constant ones, the design."""
    design = settings(config)
    blocks = int(runs["repeat"].max()) + 1 if len(runs) else 0
    varying = [k for k in STUDY_KEYS if isinstance(config.get(k), list) and len(config[k]) > 1]
    fixed = [k for k in STUDY_KEYS if k in config and k not in varying]
    order = " (Snakemake's own order)"
    if design["order"] == "blocked":
        order = f", {blocks} blocks (repeats), each running every configuration once (its frameworks' runs back "
        order += f"to back) in a random order seeded by {design['seed']} (`order.csv`)"
    return [
        f"# {title or config.get('title') or 'dlscale study'}",
        "",
        f"Runs: {_dates(runs)}. Report made {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}.",
        "",
        "## What was run",
        "",
        "- varied: " + ("; ".join(f"{k} {', '.join(map(str, config[k]))}" for k in varying) or "nothing"),
        "- the same in every run: " + "; ".join(f"{k} {_plain(config[k])}" for k in fixed),
        f"- design: {design['order']}{order}",
        f"- launcher: `{json.dumps(config.get('launcher', {}))}`",
        "",
    ]


def _plain(value):
    """A config value as text: a one-item list as its item."""
    if isinstance(value, list) and len(value) == 1:
        value = value[0]
    return value if isinstance(value, str) else json.dumps(value)


def _hardware_lines(runs, config, fits):
    """Every host the runs ran on (runs.csv `hardware`), and the link between ranks with its measured rate."""
    hosts = hardware.hosts(runs.get("hardware", pd.Series(dtype=str)))
    names = sorted({h for hs in runs.get("hosts", pd.Series(dtype=str)).dropna() for h in str(hs).split(",") if h})
    known = [f"- `{name}`: {hardware.summary(h)}" for name, h in sorted(hosts.items())]
    unknown = f"- hosts: {', '.join(names) or 'n/a'} (their hardware was not recorded)"
    return ["## Hardware", "", *(known or [unknown]), f"- link: {_link(config, fits)}", ""]


def _link(config, fits):
    """What joins the ranks, and the sweep's bandwidth per placement: Horovod's path, or MPI's where it has none."""
    emulate = config.get("emulate")
    if emulate:
        kind = "emulated nodes on this host (network namespaces, veth pairs shaped to "
        kind += f"{emulate.get('rate_mbit')} Mbit/s, {emulate.get('delay_ms', 0)} ms delay)"
    elif max(config.get("nodes", [1])) == 1:
        kind = "one node: shared memory (MPI's on-node transport)"
    else:
        kind = f"the hostfile's hosts over the network MPI chooses (launcher {config.get('launcher', {}).get('name')})"
    for path in ("horovod", "mpi") if fits is not None and len(fits) else ():
        ok = fits[(fits["path"].fillna("mpi") == path) & fits["alpha_s"].notna()]
        measured = [f"{r.nodes} node(s) x {r.ranks_per_node} rank(s): {_rate(r)}" for r in ok.itertuples()]
        if measured:
            fit = f"measured by the allreduce sweep's {path} path (ring fit, `allreduce_fit.csv`)"
            return f"{kind}; {fit}: " + "; ".join(measured)
    return kind + "; no allreduce sweep measured it"


def _rate(fit):
    """A ring fit's bandwidth and latency as text (a fit with no per-byte cost is latency-bound)."""
    bandwidth = fit.bandwidth_bytes_per_s
    rate = f"{bandwidth * 8 / 1e9:.3g} Gbit/s" if 0 < bandwidth < math.inf else "no per-byte cost resolved"
    return f"{rate}, {fit.alpha_s * 1e6:.3g} us per message"


def _provenance_lines(environment, runs):
    """The measured software (from the runs themselves), the pipeline's tooling, and the harness's commit(s)."""
    ok = runs[runs["status"] == "ok"] if len(runs) else runs
    versions = {}
    if len(ok) and "framework_version" in ok:
        versions = ok.dropna(subset=["framework_version"]).groupby("framework")["framework_version"].first().to_dict()
    python = ok["python_version"].dropna().iloc[0] if len(ok) and ok["python_version"].notna().any() else "n/a"
    pins = environment.get("pins", {})
    measured = [f"{fw} {v}" for fw, v in sorted(versions.items())]
    # the Horovod built into the frameworks' own environments (the workload environment has none)
    horovod = next((r["horovod"] for r in environment.get("apart", []) if r.get("horovod")), None)
    measured += [f"Horovod {horovod or 'n/a'}", f"MPI {environment.get('mpi', {}).get('version', 'n/a')}"]
    measured += [f"Python {python}"] + ([f"numpy {pins['numpy']}"] if "numpy" in pins else [])
    tooling = [f"{k} {v}" for k, v in pins.items() if k in TOOLING]
    return [
        "## Software",
        "",
        f"- measured: {', '.join(measured)} (each run's in `runs.csv`)",
        *_math_lines(ok),
        f"- the pipeline and analysis: {', '.join(tooling) or 'n/a'}",
        f"- environment `{environment.get('key', 'n/a')}` ({environment.get('variant', 'cpu')}); {_commits(ok)}",
    ] + [_apart_line(record) for record in environment.get("apart", [])]


def _commits(ok):
    """This report's dlscale commit and, where others launched its runs (a study resumed after a change), theirs."""
    runs = sorted(set(ok["dlscale_commit"].dropna().astype(str)) - {""}) if "dlscale_commit" in ok else []
    this = version.commit()
    if not runs or runs == [this]:
        return f"dlscale commit `{this}`"
    return f"dlscale commit `{this}` (this report); the runs launched by {', '.join(f'`{c}`' for c in runs)}"


def _math_lines(ok):
    """Each framework's math libraries as its build reports them (runs.csv `math_build`): part of what is compared."""
    named = ok["math_build"].fillna("").astype(str).str.strip() if "math_build" in ok else pd.Series(dtype=str)
    if not (named != "").any():
        return ["- math libraries: not recorded (runs made before dlscale 0.2.0 did not ask)"]
    builds = ok[named != ""].groupby("framework")["math_build"].first()
    return ["- math libraries: " + "; ".join(f"{frameworks.get(fw).LABEL}: {b}" for fw, b in builds.items())]


def _apart_line(record):
    """Where a framework run apart from the workload environment ran (its own or the user's Python), its numpy."""
    label = frameworks.get(record["framework"]).LABEL
    if record.get("user"):
        where = f"the Python `{record['python']}` (config `environments`)"
    else:
        where = f"its own environment `{record['key']}`"
    numpy = record.get("pins", {}).get("numpy")
    return f"- {label} ran in {where}" + (f", numpy {numpy}" if numpy else "")


def _results_lines(summary, runs):
    """The summary as Markdown and LaTeX tables (varying columns only), the noisy configurations, the failed runs."""
    columns = _shown(summary) if (summary["repeats_ok"] > 0).any() else COLUMNS
    rows = table_rows(summary, columns)
    noisy = summary[summary.get("noise_warning", pd.Series(dtype=str)).fillna("") != ""]
    failed = runs[runs["status"] != "ok"]
    parts = ["", f"## Results ({len(runs) - len(failed)} of {len(runs)} runs ok)", ""]
    if rows:
        fixed = f"In every row: {constants(summary) or 'nothing held fixed'}. Throughput in images/s over all ranks."
        latex = ["As LaTeX (booktabs):", "", "```latex", latex_table(rows, columns=columns), "```", ""]
        parts += [fixed, "", markdown_table(rows, columns), "", *latex]
    else:
        parts += ["Nothing to show: no successful run (the failed runs and why are below).", ""]
    if len(noisy):
        intro = "Configurations whose run-to-run coefficient of variation (CV) of the iteration time, or the 95% "
        intro += "interval of its mean, is above 5%: differences smaller than that between them are noise."
        parts += ["### Noise", "", intro, "", noise_table(noisy), ""]
    parts += _cores_lines(summary)
    if len(failed):
        parts += ["### Failed runs", ""]
        parts += [
            f"- {r.framework} {r.model} {r.allreduce_schedule} {r.allreduce_library} nodes={r.nodes} "
            f"rpn={r.ranks_per_node} repeat={r.repeat}: {r.reasons}"
            for r in failed.itertuples()
        ] + [""]
    return parts


def _cores_lines(summary):
    """The cores each configuration's ranks used (CPU / wall time) against those given; a warning where it used more."""
    if "cores_used" not in summary or summary["cores_used"].isna().all():
        return []
    shown = summary[summary["cores_used"].notna()]
    head = ["framework", "network", "ranks", "threads per rank", "cores given", "cores used"]
    rows = [
        [r.framework, r.model, str(r.ranks), str(r.threads_per_rank), _num(r.cores_given, 3), _num(r.cores_used, 3)]
        for r in shown.itertuples()
    ]
    over = shown[shown["cores_over"].astype(bool)]
    intro = "Each rank's CPU time (all its threads and loader processes) over the wall time of its measured "
    intro += "iterations, the most of any rank, mean over repeats; given: threads per rank + loader workers (with "
    intro += f"image data) + {CORES_ALLOWANCE} for the communication library's and the interpreter's threads."
    parts = ["### Cores in use", "", intro, "", _table(head, rows), "", *_probe_lines(summary)]
    parts += [
        f"- **Warning:** {r.framework} {r.model} at {r.ranks} rank(s) used {_num(r.cores_used, 3)} cores per rank, "
        f"more than the {_num(r.cores_given, 3)} its settings give: it computed on more of the machine than "
        "the frameworks it is compared with."
        for r in over.itertuples()
    ]
    return parts + ([""] if len(over) else [])


def _probe_lines(summary):
    """Each framework's matmul peak (MFU's denominator), its cores, its rate bound to that many CPUs; warnings."""
    if "matmul_cores_used" not in summary or summary["matmul_cores_used"].isna().all():
        return []
    probes = summary.drop_duplicates(["framework", "threads_per_rank"]).dropna(subset=["matmul_cores_used"])
    head = ["framework", "threads", "matmul GFLOP/s", "cores used", "bound to that many CPUs, GFLOP/s"]
    rows = [_probe_row(r) for r in probes.itertuples()]
    over = probes[probes["matmul_cores_used"] > probes["threads_per_rank"] + CORES_ALLOWANCE]
    warnings = [
        f"- **Warning:** {r.framework}'s {r.threads_per_rank}-thread matrix multiply used {_num(r.matmul_cores_used)} "
        "cores: its peak, and its MFU, are not of the cores a rank is given."
        for r in over.itertuples()
    ]
    intro = "The matrix-multiply peak MFU divides by, the cores it used, and the same multiply bound to as many "
    intro += "CPUs as threads (what that many cores of this machine can do):"
    return [intro, "", _table(head, rows), "", *warnings, *([""] if warnings else [])]


def _probe_row(r):
    rate, bound = _num(r.matmul_flops_s / 1e9), _num(r.matmul_flops_s_bound / 1e9)
    return [r.framework, str(r.threads_per_rank), rate, _num(r.matmul_cores_used), bound]


def _rules_lines(summary, config, pairs):
    """The methods section: how this study meets each of Hoefler and Belli's twelve rules (SC15)."""
    ok = summary[summary["repeats_ok"] > 0]
    if ok.empty or "iteration_s_ci_method" not in ok:
        return []
    rules = [f"{i}. {text}" for i, text in enumerate(_rules(ok, config, pairs), 1)]
    intro = "How this study meets Hoefler and Belli's rules (SC15):"
    return ["### Methods: the twelve rules", "", intro, "", *rules, ""]


def _rules(ok, config, pairs):
    """The twelve rules' lines, in the paper's order, for the configurations `ok` that have a run."""
    method = ok["iteration_s_ci_method"].fillna("")
    boot, t = int(method.str.startswith("bootstrap").sum()), int(method.str.startswith("t ").sum())
    tight = int((ok["iteration_s_ci_rel"] <= PRECISION).sum())
    frameworks = pairs[pairs["dimension"] == "framework"] if len(pairs) else pairs
    resolved = comparisons.one_analysis(frameworks)
    out = left_out(config) if "framework" in config else []
    skipped = f"; left out: {', '.join(x['framework'] + ' with ' + x['allreduce_library'] for x in out)} (why: below)"
    return [
        "speedup and efficiency are against the 1-rank run of the same framework, network, allreduce schedule, library "
        "and batch (one parallel process, not the best serial code); its absolute throughput is the "
        "`ranks` 1 row of the results table",
        "the study runs every combination of its keys (What was run)"
        + (skipped if out else "")
        + f"; each rank has {config.get('threads_per_rank', 'n/a')} thread(s)".replace("[", "").replace("]", ""),
        "costs (iteration, phase times) by the arithmetic mean over repeats; the throughput, a rate, by the "
        "harmonic mean (ranks x batch / the mean iteration time), its interval the iteration time's carried over",
        "speedup, efficiency and the pairwise ratios are ratios of the summarized rates, never summarized themselves",
        f"nothing here is deterministic: every number has a 95% interval over {_repeats(ok, config)}; the mean "
        f"iteration time's interval is within ±{PRECISION:.0%} of it in {tight} of {len(ok)} configurations",
        f"normality is tested, not assumed: Student-t in {t} configuration(s) (Shapiro-Wilk did not reject it, "
        f"or 2 repeats could not be tested; on the log scale where it rejected it with fewer than "
        f"{MIN_BOOTSTRAP} repeats), percentile bootstrap in {boot} (from {MIN_BOOTSTRAP} repeats), "
        f"none in {len(ok) - t - boot} (1 repeat); per configuration in `summary.csv` (`iteration_s_ci_method`)",
        "frameworks are compared by their throughput ratio with its simultaneous interval, every run of a "
        "configuration in one model of log throughput on framework and block (Framework comparisons), verdicts "
        f"at 5% per configuration (Tukey): {resolved} of {len(frameworks)} framework pairs resolved (one faster, or "
        "equal within ±5%); the paired and independent analyses beside it",
        "beside the mean, each run's median and 95th percentile iteration time; far-out iterations (above the "
        f"third quartile + 3 interquartile ranges): {int(ok['outlier_iterations'].fillna(0).sum())}, kept in "
        "every mean (`run_metrics.csv`)",
        "the varying factors and their levels are in What was run; the hosts in Hardware; the software and "
        "its versions in Software, and every run's in `runs.csv`",
        f"timing `{', '.join(config.get('timing', ['n/a']))}`: an iteration's time is the slowest rank's wall time "
        f"(synchronous SGD waits for it). Warm-up iterations ({config.get('warmup', 'n/a')}) are excluded; "
        f"{_measured(ok, config)}. Leading iterations not yet steady (above the run's second-half median + 3 "
        f"robust standard deviations) are left out too: {int(ok['unsteady_iterations'].fillna(0).sum())} in all. "
        "Phases come from traces (native timing) or from a wait after each phase (phased): docs/concepts/phases.md",
        "upper bounds: each framework's matrix-multiply rate (`mfu` in `summary.csv`), ideal scaling in the "
        "efficiency figure, and the performance model's prediction",
        "figures plot each measured configuration with its 95% interval; lines join the rank counts of one "
        "setting only (a trend in ranks), on a log-2 axis ticked where measured",
    ]


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
        return f"each run measures {config.get('iterations', 'n/a')} iterations"
    met = int((ok["runs_target_met"] == ok["repeats_ok"]).sum()) if "runs_target_met" in ok else 0
    return (
        f"each run measures at least {config['iterations']} iterations, then goes on until its median iteration "
        f"time's 95% interval is within ±{samples['target']:.0%} on every rank (at most {samples['max_iterations']} "
        f"iterations or {samples['max_seconds']:g} s); every run met that in {met} of {len(ok)} configurations "
        "(`runs_target_met` in `summary.csv`)"
    )


def _needed(value):
    """blocks_needed as a cell: empty where resolved, "> 200" where out of reach."""
    if pd.isna(value):
        return ""
    return f"> {comparisons.MOST_BLOCKS}" if value > comparisons.MOST_BLOCKS else str(int(value))


def _with_holm(row, analysis):
    """A ratio with its verdict's Holm-adjusted p-values, "r (p differ, p equal)" (its 95% interval is not adjusted)."""
    p = [_num(row.get(f"{name}{analysis}"), 2) for name in ("p_holm", "p_equal_holm")]
    return f"{_num(row.get(f'ratio{analysis}'))} (p {p[0]}, {p[1]})"


def _comparison_rows(pairs, dimension):
    """comparisons.csv's rows of one dimension as report cells: the three analyses side by side."""
    rows = pairs[pairs["dimension"] == dimension] if len(pairs) else pairs
    varying = [
        k for k in ("allreduce_schedule", "layout", "timing", "batch_size") if len(rows) and rows[k].nunique() > 1
    ]
    head = ["a / b", "network", "ranks"] + varying
    head += ["ratio [simultaneous 95% CI]", "verdict", "blocks needed", "blocks"]
    head += ["paired ratio (Holm p: differ, equal)", "verdict", "independent ratio (Holm p: differ, equal)", "verdict"]
    cells = []
    for r in rows.to_dict("records"):
        if dimension == "framework":
            who = f"{r['a']} ({r['a_library']}) / {r['b']} ({r['b_library']})"
        else:
            who = f"{r['framework']}: {r['a']} / {r['b']}"
        analyses = [_with_ci(r, "ratio"), r["verdict"] or "n/a", _needed(r["blocks_needed"]), str(r["blocks"])]
        analyses += [_with_holm(r, "_paired"), r["verdict_paired"] or "n/a"]
        analyses += [_with_holm(r, "_independent"), r["verdict_independent"] or "n/a"]
        cells.append([who, r["model"], str(r["ranks"])] + [str(r[k]) for k in varying] + analyses)
    return head, cells


def _checks_lines(blocks):
    """The block model's fits and residual checks (blocks.csv), and whether its variance was pooled."""
    if blocks is None or blocks.empty:
        return []
    head = ["network", "ranks", "frameworks", "blocks", "residual df", "residual sd (log, ~CV)", "Shapiro-Wilk p"]
    counts = ("model", "ranks", "cells", "blocks", "residual_df")
    cells = [
        [*(str(r[k]) for k in counts), _share(r["residual_sd_log"]), _num(r["shapiro_p"]), _num(r["levene_p"])]
        for r in blocks.to_dict("records")
    ]
    first = blocks.iloc[0]
    pooled = "each configuration uses its own residual variance"
    if first["pooled"]:
        pooled = f"the comparisons use the variance pooled over the {len(blocks)} configurations ({int(first['df'])} "
        pooled += f"degrees of freedom, residual sd {_share(first['sd_log'])})"
    doubtful = blocks[(blocks["shapiro_p"] < 0.05) | (blocks["levene_p"] < 0.05)]
    text = "Block model's fits (blocks.csv). Bartlett's test of equal residual variance across configurations: p = "
    text += f"{_num(first['bartlett_p'])}, so {pooled}."
    if len(doubtful):
        text += f" Residual checks reject normality or equal variance (p < 0.05) in {len(doubtful)} configuration(s): "
        text += "there the paired analysis, which assumes neither across frameworks, is the one to read."
    return [text, "", _table(head + ["Levene p"], cells), ""]


def _sequential_lines(looks, config):
    """design.until_resolved: the looks made, the blocks added, and where each configuration stands after the last."""
    settings = (config.get("design") or {}).get("until_resolved")
    if not settings or looks is None or looks.empty:
        return []
    final = looks[looks["look"] == looks["look"].max()]
    added = looks[looks["decision"] == sequential.ADDED]
    why = "; ".join(f"{count} {reason}" for reason, count in final["decision"].value_counts().items())
    said = f"Design: blocks added until resolved (`design.until_resolved`: at most {settings['max_blocks']} blocks, "
    said += f"{settings['budget_minutes']:g} minutes of added runs): {looks['look'].max()} look(s) after the "
    said += f"{config.get('repeats')} planned blocks added {len(added)} block(s) of a configuration; each analysis, "
    said += f"the final one too, at {final['alpha'].iloc[0]:.3g} (5% split over "
    said += f"{sequential.looks(settings, config.get('repeats', 0))} possible looks, Bonferroni). After the last look, "
    said += f"per configuration: {why} (`sequential.csv`)."
    return [said, ""]


def _framework_lines(pairs, blocks=None):
    """Each pair of frameworks (default libraries) in each configuration both ran: three analyses, then the checks."""
    head, cells = _comparison_rows(pairs, "framework")
    if not cells:
        return []
    frameworks = pairs[pairs["dimension"] == "framework"]
    resolved = ", ".join(f"{comparisons.one_analysis(frameworks, n)} {w}" for n, w in comparisons.ANALYSES.items())
    intro = f"Resolved of {len(frameworks)} pairs: {resolved}. {_more_blocks(frameworks)}"
    intro += (
        "Block model (the verdict): per configuration, log throughput = framework + block + error over every run "
        "of the configuration at once (a block is one repeat index: every configuration ran once per block, so "
        "drift shared by a block cancels); each pair's ratio with a simultaneous 95% interval (Tukey-Kramer over "
        "the configuration's frameworks), `a faster` or `b faster` exactly where that interval excludes 1, `equal` "
        "where the simultaneous 90% interval lies inside 0.95-1.05 (two one-sided tests), else `unresolved`; "
        "`blocks needed`: the complete blocks that would resolve it at its measured ratio and spread. Paired: the "
        "geometric mean of the blocks' own a / b ratios, its interval Student-t on the log scale. Independent: the "
        "ratio of the two harmonic-mean throughputs, its interval by the delta method on the log scale. Their "
        f"verdicts are Holm-adjusted over all {len(pairs)} comparisons of the study (2 hypotheses each), so the table "
        "shows each one's Holm-adjusted p-values (that the ratio differs from 1; that it lies outside 0.95-1.05) "
        "and not its 95% interval, which is not adjusted and could sit clear of 1 beside `unresolved` "
        "(`comparisons.csv` keeps it: `ratio_paired_ci_lo` ...)."
    )
    return ["## Framework comparisons", "", intro, "", _table(head, cells), ""] + _checks_lines(blocks)


def _more_blocks(frameworks):
    """What more blocks would resolve at each pair's measured ratio and spread (to plan a longer study)."""
    ran = pd.to_numeric(frameworks["blocks"], errors="coerce").max()
    if not ran > 0:
        return ""
    counts = [int(ran * k) for k in (2, 3, 5, 10) if ran * k <= comparisons.MOST_BLOCKS]
    said = ", ".join(f"{n} blocks {comparisons.resolved_with(frameworks, n)}" for n in counts)
    return f"At the measured spreads the block model would resolve, with more blocks: {said} of {len(frameworks)}. "


def _library_lines(pairs, config):
    """Frameworks run through both libraries (native / horovod), and the framework x library pairs left out, why."""
    head, cells = _comparison_rows(pairs, "allreduce_library")
    out = left_out(config)
    if not cells and not out:
        return []
    parts = ["## Communication libraries", ""]
    if cells:
        intro = "Throughput through each framework's own library against Horovod's, same configuration (native / "
        intro += "horovod; the three analyses as in Framework comparisons, the block model's family every framework x "
        intro += "library cell of the configuration)."
        parts += [intro, "", _table(head, cells), ""]
    if out:
        parts += ["Left out before anything ran:", ""]
        parts += [f"- {x['framework']} with {x['allreduce_library']}: {x['reason']}" for x in out] + [""]
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
