# What sharing a node costs a rank's compute: per configuration and ranks_per_node of 2 or more, its
# 1-rank run: that many copies started at once, measuring alone and together in alternating order (dlscale/runtime/contention.py),
# and the table the model reads (TABLE["contention"]). A calibration that fails says why in its
# output; the study goes on and the model assumes no slowdown there, saying so.


rule contention:
    input:
        env=run_environment,
        environments=list(FRAMEWORK_ENVS.values()),
        hostfile=config["hostfile"],
        data=[DATA_MANIFEST] if DATASET else [],
    output:
        f"{RESULTS}/{paths.CONTENTION}/{paths.CONTENTION_PATTERN}.jsonl",
    log:
        f"{LOGS}/{paths.CONTENTION}/{paths.CONTENTION_PATTERN}.log",
    threads: workflow.cores
    resources:
        cpus_per_task=lambda w: int(w.threads_per_rank),
        run_timeout_s=RUN_TIMEOUT,
    params:
        run=paths.calibration_from_wildcards,
        settings=json.dumps({**cfg.run_settings(config), "contention": config["contention"]}, sort_keys=True),
        folder=lambda w: f"{RESULTS}/{paths.contention(paths.calibration_from_wildcards(w))}",
    run:
        step(rule, rule_steps.contention, input, output, params, log, resources)


rule contention_table:
    input:
        list(CONTENTION),
    output:
        TABLE["contention"],
    log:
        f"{LOGS}/contention_table.log",
    params:
        calibrations=json.dumps(
            [
                [{**run, **{k: config[k] for k in ("image_size", "classes", "precision")}}, path]
                for path, run in CONTENTION.items()
            ],
            sort_keys=True,
        ),
    run:
        step(rule, steps.write_contention, input, output, params, log, resources)
