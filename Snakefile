# dlscale: a scaling study of data-parallel training through Horovod.
# config (validated) -> run matrix -> one MPI job per run -> per-rank records -> tidy table
# -> summary -> figures, and allreduce sweeps -> alpha-beta fit -> performance model against
# the runs and extrapolated to larger clusters. Every arrow is a file under results/ (logs under logs/).
import sys

from harness import config as cfg


configfile: cfg.DEFAULT_CONFIG


report: "report/workflow.rst"


cfg.validate(config)
for warning in cfg.warnings(config):
    print(f"dlscale: warning: {warning}", file=sys.stderr)


include: "rules/common.smk"
include: "rules/environment.smk"
include: "rules/runs.smk"


if DATASET:

    include: "rules/data.smk"


include: "rules/allreduce.smk"


if REPLAYS:

    include: "rules/replay.smk"


include: "rules/analysis.smk"


# Everything but the MPI jobs (runs, allreduce sweeps, replays) runs where snakemake runs, also when a
# cluster executor (profiles/slurm) submits the MPI jobs.
localrules:
    all,
    environment,
    tidy,
    run_metrics,
    flops,
    summary,
    figures,
    allreduce_tables,
    replay_tables,
    model,
    paper_report,
    order,


# Ctrl-C, SIGTERM or SIGHUP to snakemake stops the MPI job in flight at once (harness/rule.py).
onstart:
    rule_process.forward_signals()


# The runs and sweeps are targets themselves: one left incomplete (interrupted, or its status.json
# removed) is redone by the next `snakemake`, and the tables after it, even when the tables exist.
rule all:
    input:
        RUNS,
        list(SWEEPS),
        list(REPLAYS),
        TABLE["tidy"],
        TABLE["summary"],
        TABLE["allreduce_fit"],
        TABLE["model"],
        FIGURES,
        MODEL_FIGURES,
        TABLE["order"],
        TABLE["report"],
