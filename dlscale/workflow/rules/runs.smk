# One MPI job per run. A run that fails (crash, lost rank, timeout, wrong results) is recorded as
# failed in its status.json with its logs kept; the study goes on. Runs take every core so that
# no two measurements overlap.


wildcard_constraints:
    framework="[a-z0-9]+",
    model="[a-z0-9]+",
    allreduce_schedule="[a-z]+",
    allreduce_library="[a-z]+",
    layout="[A-Za-z]+",
    timing="[a-z]+",
    nodes=r"\d+",
    ranks_per_node=r"\d+",
    batch_size=r"\d+",
    loader_workers=r"\d+",
    threads_per_rank=r"\d+",
    repeat=r"\d+",


rule run:
    input:
        env=run_environment,
        # every framework's Python admitted before any run starts
        environments=list(FRAMEWORK_ENVS.values()),
        hostfile=config["hostfile"],
        data=[DATA_MANIFEST] if DATASET else [],
    output:
        f"{RESULTS}/{paths.RUNS}/{paths.RUN_PATTERN}/{STATUS}",
    log:
        f"{LOGS}/{paths.RUNS}/{paths.RUN_PATTERN}.log",
    # the design's order (dlscale/runtime/design.py): blocks first to last, each in its seeded random order
    priority: lambda w: design.priority(paths.run_from_wildcards(w), DESIGN)
    threads: workflow.cores
    resources:
        cpus_per_task=lambda w: int(w.threads_per_rank),  # Slurm CPUs per rank, as the srun launcher asks
        run_timeout_s=RUN_TIMEOUT,
    params:
        run=paths.run_from_wildcards,
        settings=json.dumps(cfg.run_settings(config), sort_keys=True),
        attempts=lambda w: f"{RESULTS}/{paths.attempts(paths.run_path(paths.run_from_wildcards(w)))}",
    run:
        step(rule, rule_steps.run, input, output, params, log, resources)


# The order the design gives the first pass's runs, for the report and the reader.
rule order:
    output:
        TABLE["order"],
    log:
        f"{LOGS}/order.log",
    params:
        design=json.dumps(DESIGN, sort_keys=True),
        matrix=json.dumps(cfg.matrix(config), sort_keys=True),
    run:
        step(rule, steps.write_order, input, output, params, log, resources)
