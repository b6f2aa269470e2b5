# Names shared by the rule files.
import json
import sys
from pathlib import Path

from dlscale.runtime import config as cfg
from dlscale.runtime import design
from dlscale.runtime import progress
from dlscale.core import paths
from dlscale.core.vocabulary import STATUS
from dlscale.workloads import images
from dlscale.runtime import dataset
from dlscale.environment import build as env
from dlscale.runtime import peak
from dlscale.runtime import rule as rule_process
from dlscale.runtime import rule_steps
from dlscale.runtime import signals
from dlscale.runtime import environments
from dlscale.analysis import second_pass, sequential, steps
from dlscale.workloads import flops

RESULTS = config.get("results", "results")
LOGS = config.get("logs", "logs")
ENV_RECORD = f"{RESULTS}/{env.RECORD}"
# Each framework of the study runs in a Python of the user's or in its own environment, admitted by
# its own check's record.
FRAMEWORK_ENVS = {fw: f"{RESULTS}/{paths.framework_environment(fw)}.json" for fw in config["framework"]}
# The allreduce sweep's MPI and Horovod paths and the replays run in the Python of the framework
# whose Horovod binding they hand their tensors to (cfg.instrument; a study that runs nothing
# through Horovod: the workload environment, which has mpi4py), the FLOPs count in that of the
# framework whose definitions count them (flops.counter): each one the study runs, so a study
# builds no framework it does not run.
INSTRUMENT_ENV = FRAMEWORK_ENVS.get(cfg.instrument(config), ENV_RECORD)
FLOPS_COUNTER = flops.counter(config["framework"])
FLOPS_ENV = FRAMEWORK_ENVS.get(FLOPS_COUNTER, ENV_RECORD)
# The frameworks whose native path or Horovod binding the allreduce sweep times apart, each in its
# framework's Python: {framework: record}.
SWEPT_APART = {fw: FRAMEWORK_ENVS[fw] for fw in cfg.swept_apart(config)}
TABLE = {name: f"{RESULTS}/{file}" for name, file in paths.TABLES.items()}
DATASET = cfg.dataset_folder(config)
DATA_MANIFEST = str(DATASET / images.MANIFEST) if DATASET else None
# {framework: the Python that writes its record format} for the study's frameworks that have one.
DATA_WRITERS = {fw: environments.python_of(config, fw) for fw in config["framework"] if fw in images.formats()}
RUNS = [f"{RESULTS}/{paths.run_status(run)}" for run in cfg.matrix(config)]
SECOND_PASS = config.get("second_pass")
# An MPI job's time limit: the rules' resource, not a param, so that a longer limit remakes nothing;
# text, because Snakemake cuts a number resource to an integer (90.5 s would be 90).
RUN_TIMEOUT = str(config["run_timeout_s"])
DESIGN = design.settings(config)
# design.until_resolved: blocks added look by look (dlscale/analysis/sequential.py); each analysis's error.
UNTIL_RESOLVED = DESIGN.get("until_resolved")
ALPHA = sequential.alpha(DESIGN, config["repeats"])
LOOK = f"{RESULTS}/{paths.LOOK_PATTERN}"
TITLE = cfg.title(config, workflow.configfiles)
# One allreduce sweep per (nodes, ranks_per_node) of the study with at least 2 ranks, and per
# node count replayed (one rank per node).
SWEEPS = {
    f"{RESULTS}/{paths.sweep(n, r)}.jsonl": (n, r)
    for n, r in [(n, r) for n in config["nodes"] for r in config["ranks_per_node"]]
    + [(n, 1) for n in cfg.replay_nodes(config)]
    if n * r > 1
}
REPLAY_PLANS = f"{RESULTS}/{paths.REPLAY_PLANS}"
# One contention calibration per configuration and ranks_per_node of 2 or more: {trials file: run identity}.
CONTENTION = {f"{RESULTS}/{paths.contention(run)}.jsonl": run for run in cfg.calibrations(config)}
REPLAYS = {f"{RESULTS}/{paths.replay(n)}.jsonl": n for n in cfg.replay_nodes(config)}
FIGURES = paths.figure_paths(f"{RESULTS}/{paths.FIGURES}", paths.FIGURE_NAMES)
MODEL_FIGURES = paths.figure_paths(f"{RESULTS}/{paths.FIGURES}", paths.model_figures(REPLAYS))


# Rules whose work bounds itself (an MPI job: run_timeout_s, a declared resource) or may take long
# by nature (building the environment, making the images); every other step stops at step_timeout_s.
UNTIMED = {"run", "allreduce", "replay", "contention", "environment", "dataset", "framework_environment"}


def step(rule_name, function, *declared):
    """Every rule's work: `function` given the rule's declared lists (input, output, params, log,
    resources), in a process of its own, stopped by a signal and, unless UNTIMED, after
    step_timeout_s (dlscale/runtime/rule.py `step`); after a run, the study's progress line."""
    limit = None if rule_name in UNTIMED else config["step_timeout_s"]
    rule_process.step(rule_name, function, declared, timeout_s=limit)
    if rule_name == "run":
        output = declared[1]
        say_progress(output[0])


def say_progress(status):
    """After a run: the study's progress line (dlscale/runtime/progress.py) on the terminal, over the
    runs planned so far (the first pass's, those the looks or the second pass made so far added) and
    `status`. A run job cannot wait on a checkpoint: the tables made so far are read where they lie."""
    import pandas as pd

    added = []
    if UNTIL_RESOLVED:
        for look in range(sequential.looks(UNTIL_RESOLVED, config["repeats"])):
            table = Path(LOOK.format(look=look))
            if not table.is_file():
                break
            added += _look_added(look, pd.read_csv(table))
    elif SECOND_PASS and Path(TABLE["second_pass"]).is_file():
        added = _second_pass_added(pd.read_csv(TABLE["second_pass"]))
    print(progress.line(sorted({*RUNS, *added, str(status)})), flush=True)


def _look_added(look, table):
    """The status paths of the runs look `look` (its table) adds: block repeats + look."""
    added = sequential.added_runs(cfg.matrix(config), table, config["repeats"] + look)
    return [f"{RESULTS}/{paths.run_status(run)}" for run in added]


def _second_pass_added(plan):
    """The status paths of the runs the second pass's plan adds."""
    return [f"{RESULTS}/{paths.run_status(run)}" for run in second_pass.added_runs(cfg.matrix(config), plan)]


def run_environment(wildcards):
    """The environment record a run of wildcards.framework runs in: the user's Python's, or its own
    environment's."""
    return FRAMEWORK_ENVS[wildcards.framework]


def looks_before(upto):
    """[(look table, the runs it added)] of the looks before look `upto` (each look a checkpoint:
    reading one waits for it), up to the first look that added none."""
    import pandas as pd

    made = []
    for look in range(upto):
        table = checkpoints.look.get(look=look).output[0]
        added = _look_added(look, pd.read_csv(table))
        made.append((table, added))
        if not added:
            break
    return made


def look_runs(wildcards):
    """Every run a look analyses: the planned blocks' and the blocks the looks before it added."""
    return RUNS + [run for _, added in looks_before(int(wildcards.look)) for run in added]


def all_looks():
    """Every look the study makes: looks until one adds no block or the last block is added."""
    return looks_before(sequential.looks(UNTIL_RESOLVED, config["repeats"]) - 1) if UNTIL_RESOLVED else []


def looks_done(wildcards):
    """The tables of the looks the study made."""
    return [table for table, _ in all_looks()]


def study_runs(wildcards):
    """The first pass's runs and, with a second pass, the runs its plan (a checkpoint) adds; with
    design.until_resolved, the blocks its looks add."""
    if UNTIL_RESOLVED:
        return RUNS + [run for _, added in all_looks() for run in added]
    if not SECOND_PASS:
        return RUNS
    import pandas as pd

    return RUNS + _second_pass_added(pd.read_csv(checkpoints.second_pass.get().output[0]))


def reported(paths, category):
    """The PNG ones of `paths` registered for `snakemake --report`, captioned by report/<name>.rst."""

    def captioned(path):
        # (a line may not start with `report(`: Snakemake's parser would take it for the report keyword)
        return report(path, caption=f"../report/{Path(path).stem}.rst", category=category)

    return [captioned(p) if p.endswith(".png") else p for p in paths]
