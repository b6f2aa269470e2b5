"""results/report.md: the study as a paper cites it. What was run and on what (config, hosts,
environment, versions, the harness's commit), the summary as a Markdown table and as a LaTeX table
(booktabs), the noise and failure warnings, the performance model's error, and the figures with
their captions (report/*.rst, the same captions as `snakemake --report`)."""

import json
import math
import subprocess
from pathlib import Path

import pandas as pd

ROOT = Path(__file__).resolve().parent.parent
CAPTIONS = ROOT / "report"
STUDY_KEYS = ("framework", "model", "comm", "layout", "timing", "nodes", "ranks_per_node", "batch_size",
              "image_size", "threads_per_rank", "precision", "device", "warmup", "iterations", "profile_iterations",
              "repeats", "autotune", "tf32", "hostfile", "emulate")
COLUMNS = [("framework", "framework"), ("model", "network"), ("comm", "comm"), ("layout", "layout"),
           ("timing", "timing"), ("ranks", "ranks"), ("throughput_img_per_s", "img/s (95% CI)"),
           ("speedup", "speedup (95% CI)"), ("efficiency", "efficiency (95% CI)"), ("iteration_s_cv", "CV"),
           ("repeats_ok", "repeats")]


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
        return (text.replace("\\", r"\textbackslash{}").replace("_", r"\_").replace("%", r"\%")
                .replace("&", r"\&").replace("#", r"\#"))

    head = " & ".join(esc(name) for _, name in COLUMNS) + r" \\"
    body = "\n".join(" & ".join(esc(c) for c in r) + r" \\" for r in rows)
    return (f"\\begin{{table}}\n\\centering\n\\begin{{tabular}}{{{'l' * 5}{'r' * (len(COLUMNS) - 5)}}}\n"
            f"\\toprule\n{head}\n\\midrule\n{body}\n\\bottomrule\n\\end{{tabular}}\n"
            f"\\caption{{Throughput (mean over repeats, 95\\% Student-t interval), speedup and efficiency "
            f"against 1 rank (95\\% delta-method interval), run-to-run coefficient of variation of the "
            f"iteration time.}}\n\\label{{{label}}}\n\\end{{table}}")


def commit():
    try:
        out = subprocess.run(["git", "-C", str(ROOT), "describe", "--always", "--dirty"], capture_output=True,
                             text=True, timeout=10)
        return out.stdout.strip() or "unknown (not a git checkout)"
    except (OSError, subprocess.TimeoutExpired):
        return "unknown (no git)"


def caption(name):
    path = CAPTIONS / f"{name}.rst"
    return " ".join(path.read_text().split()) if path.exists() else ""


def write(summary, runs, environment, model_error, figures, config, out_path):
    """figures: the figure files (PNG ones are shown), relative links from out_path's folder."""
    out_path = Path(out_path)
    rows = table_rows(summary)
    noisy = summary[summary.get("noise_warning", pd.Series(dtype=str)).fillna("") != ""]
    failed = runs[runs["status"] != "ok"]
    hosts = sorted({h for hs in runs.get("hosts", pd.Series(dtype=str)).dropna() for h in str(hs).split(",") if h})
    parts = [f"# dlscale study: `{config.get('results', 'results')}`", "",
             "## What was run", ""]
    parts += [f"- {k}: `{json.dumps(config[k])}`" for k in STUDY_KEYS if k in config]
    parts += [f"- hosts: {', '.join(hosts) or 'n/a'}",
              f"- launcher: `{json.dumps(config.get('launcher', {}))}`", "", "## Environment and provenance", "",
              f"- dlscale commit: `{commit()}`",
              f"- environment: `{environment.get('key', 'n/a')}` ({environment.get('variant', 'cpu')}), "
              f"Horovod {environment.get('horovod', 'n/a')}",
              f"- MPI: {environment.get('mpi', {}).get('version', 'n/a')}",
              f"- pins: {', '.join(f'{k} {v}' for k, v in environment.get('pins', {}).items())}"]
    if len(runs):
        first = runs.iloc[0]
        parts.append(f"- Python {first.get('python_version', 'n/a')}; framework versions per run in `runs.csv`")
    parts += ["", f"## Results ({len(runs) - len(failed)} of {len(runs)} runs ok)", ""]
    if rows:
        parts += [markdown_table(rows), "", "As LaTeX (booktabs):", "", "```latex", latex_table(rows), "```", ""]
    else:
        parts += ["Nothing to show: no successful run (the failed runs and why are below).", ""]
    if len(noisy):
        parts += ["### Noise", ""] + [f"- {r.framework} {r.model} {r.comm} {r.layout} {r.timing} {r.ranks} ranks: "
                                      f"{r.noise_warning}" for r in noisy.itertuples()] + [""]
    if len(failed):
        parts += ["### Failed runs", ""] + [f"- {r.framework} {r.model} {r.comm} nodes={r.nodes} "
                                            f"rpn={r.ranks_per_node} repeat={r.repeat}: {r.reasons}"
                                            for r in failed.itertuples()] + [""]
    if model_error.get("reason"):  # no run predicted: why, and the replays' errors if any
        parts += ["## Performance model", "", f"Nothing predicted for the study's runs: {model_error['reason']}.", ""]
        if model_error.get("replay"):
            parts += ["```json", json.dumps({"replay": model_error["replay"]}, indent=2), "```", ""]
    elif model_error:
        parts += ["## Performance model", "", "```json", json.dumps(model_error, indent=2), "```", ""]
    parts += ["## Figures", ""]
    for fig in figures:
        fig = Path(fig)
        if fig.suffix == ".png":
            rel = fig.relative_to(out_path.parent) if fig.is_relative_to(out_path.parent) else fig
            parts += [f"![{fig.stem}]({rel})", "", f"*{caption(fig.stem)}* (PDF: `{rel.with_suffix('.pdf')}`)", ""]
    out_path.write_text("\n".join(parts) + "\n")
    return out_path
