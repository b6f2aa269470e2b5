"""The results tree's paths, relative to the results folder (logs/ mirrors it); with wildcards, a rule's pattern."""

import os
import re
from pathlib import Path

from dlscale.core.vocabulary import MATRIX_KEYS, STATUS

SOURCE_ENV = "DLSCALE_SOURCE"
PACKAGE = Path(__file__).resolve().parents[1]  # the installed dlscale (a checkout's, or site-packages')
# On PYTHONPATH, a run's python imports this dlscale; a command re-run in the workload environment
# names a folder holding only dlscale, so the site's other packages do not shadow the pins.
SOURCE = Path(os.environ.get(SOURCE_ENV) or PACKAGE.parent)
WORKFLOW = PACKAGE / "workflow"  # the Snakefile, rules, schema, shipped configs, report captions


def shipped_configs():
    """The configs the package ships, by name (`default`: config.yaml), for `dlscale init --from`."""
    found = {p.stem: p for p in sorted((WORKFLOW / "config").glob("*.yaml")) if p.stem != "schema"}
    return {"default": found.pop("config"), **found}


RUNS, ATTEMPTS, SWEEPS, REPLAYS, CONTENTION = "runs", "attempts", "allreduce", "replay", "contention"
REPLAY_PLANS = f"{REPLAYS}/plans.json"

# A run's place under runs/ (and attempts/, logs/runs/): its identity, one folder level per word key.
WORD_KEYS = ("framework", "model", "allreduce_schedule", "allreduce_library", "layout", "timing")
RUN_PATTERN = (
    "{framework}/{model}/{allreduce_schedule}/{allreduce_library}/{layout}/{timing}/nodes{nodes}_rpn{ranks_per_node}_bs{batch_size}_"
    "lw{loader_workers}_t{threads_per_rank}/repeat{repeat}"
)


def run_path(run):
    """A run's identity as a path (runs/, attempts/ and logs/runs/ hold it)."""
    return RUN_PATTERN.format(**run)


def run_folder(run):
    return f"{RUNS}/{run_path(run)}"


def run_status(run):
    return f"{run_folder(run)}/{STATUS}"


def sweep(nodes, ranks_per_node):
    """An allreduce sweep's name: add .jsonl for its output, .log for its log."""
    return f"{SWEEPS}/nodes{nodes}_rpn{ranks_per_node}"


# A calibration of what sharing a node costs: a configuration's 1-rank identity, the ranks per node.
CONTENTION_PATTERN = (
    "{framework}/{model}/{allreduce_schedule}/{allreduce_library}/{layout}/{timing}/bs{batch_size}_lw{loader_workers}_t{threads_per_rank}/"
    "rpn{ranks_per_node}"
)


def contention(run):
    """A calibration's name (add .jsonl for its trials, .log for its log), the folder of its copies' runs."""
    return f"{CONTENTION}/{CONTENTION_PATTERN.format(**run)}"


def calibration_from_wildcards(wildcards):
    """A calibration's run identity (nodes 1, repeat 0) from the contention rule's wildcards."""
    fixed = {"nodes": 1, "repeat": 0}
    return run_from_wildcards({k: fixed[k] if k in fixed else wildcards[k] for k in MATRIX_KEYS + ("repeat",)})


def replay(nodes):
    """A replay's name: add .jsonl and .spec.json for its outputs, .log for its log."""
    return f"{REPLAYS}/nodes{nodes}"


def framework_environment(framework):
    """The record (add .json) and check log (.log) of the user's Python a framework runs in."""
    return f"environments/{framework}"


def attempts(name):
    """Where the earlier attempts of a run (its run_path), a sweep or a replay are kept."""
    return f"{ATTEMPTS}/{name}"


def run_files(config, run):
    """(run folder, log file, attempts folder) of one run of the study `config`."""
    results, logs = Path(config.get("results", "results")), Path(config.get("logs", "logs"))
    return results / run_folder(run), logs / f"{run_folder(run)}.log", results / attempts(run_path(run))


def run_from_path(run_dir):
    """The run identity a run folder's place in the results tree gives (its last path parts)."""
    pattern = re.sub(r"\\\{(\w+)\\\}", r"(?P<\1>[^/]+)", re.escape(RUN_PATTERN))  # each escaped {key}: a group
    found = re.search(pattern + "$", Path(run_dir).as_posix())
    if not found:
        raise ValueError(f"{run_dir} is not a run folder ({RUN_PATTERN})")
    return run_from_wildcards(found.groupdict())


def run_from_wildcards(wildcards):
    """A run identity from the results tree's wildcards (counts become ints)."""
    return {k: (str(wildcards[k]) if k in WORD_KEYS else int(wildcards[k])) for k in MATRIX_KEYS + ("repeat",)}


# The study's tables and the files made from them, under the results folder, by name.
TABLES = {
    file.split(".")[0]: file
    for file in (
        "tidy.csv runs.csv second_pass.csv tensors.csv run_metrics.csv peak.csv flops.csv summary.csv comparisons.csv "
        "blocks.csv sequential.csv order.csv allreduce.csv allreduce_fit.csv model.csv replayed.csv replay.csv "
        "model_error.json gradients.csv extrapolation.csv contention.csv report.md"
    ).split()
}
FIGURES = "figures"
# The figures' names, each drawn in every format: here, so reading the workflow imports no plotting.
FIGURE_NAMES = ("throughput", "efficiency", "phases", "input", "comparisons")
MODEL_FIGURE_NAMES = ("model", "extrapolation", "replay")
FIGURE_FORMATS = ("pdf", "png")


def model_figures(replays):
    """The model's figures a study draws: the replay figure only where it replays (config `replay`)."""
    return MODEL_FIGURE_NAMES if replays else tuple(f for f in MODEL_FIGURE_NAMES if f != "replay")


def figure_paths(folder, names):
    """The files of the named figures in `folder`, one per format."""
    return [f"{folder}/{name}.{ext}" for name in names for ext in FIGURE_FORMATS]


LOOK_PATTERN = "looks/look-{look}.csv"  # design.until_resolved: each look's table, under the results folder
HTML_REPORT = "report.html"  # snakemake --report's
