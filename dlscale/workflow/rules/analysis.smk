# Records -> tidy table and run table -> summary -> figures; with the allreduce fit -> model.


# With `second_pass`, a checkpoint plans more repeats from the first pass (dlscale/analysis/second_pass.py); the
# tables read the runs it adds too.
if SECOND_PASS:

    localrules:
        second_pass,

    checkpoint second_pass:
        input:
            RUNS,
        output:
            TABLE["second_pass"],
        log:
            f"{LOGS}/second_pass.log",
        params:
            settings=json.dumps(SECOND_PASS, sort_keys=True),
            repeats=config["repeats"],
        run:
            step(rule, steps.write_second_pass, input, output, params, log, resources)


# With `design.until_resolved`, a checkpoint per look adds a block to the configurations the block model
# leaves unresolved (dlscale/analysis/sequential.py); the tables read the runs they add too.
if UNTIL_RESOLVED:

    localrules:
        look,

    checkpoint look:
        input:
            look_runs,
        output:
            LOOK,
        log:
            f"{LOGS}/looks/look-{{look}}.log",
        wildcard_constraints:
            look=r"\d+",
        params:
            settings=json.dumps(UNTIL_RESOLVED, sort_keys=True),
            repeats=config["repeats"],
            look=lambda w: int(w.look),
        run:
            step(rule, steps.write_look, input, output, params, log, resources)


rule tidy:
    input:
        study_runs,
    output:
        tidy=TABLE["tidy"],
        runs=TABLE["runs"],
        tensors=TABLE["tensors"],
    log:
        f"{LOGS}/tidy.log",
    run:
        step(rule, steps.write_tables, input, output, params, log, resources)


rule run_metrics:
    input:
        TABLE["tidy"],
    output:
        TABLE["run_metrics"],
    log:
        f"{LOGS}/run_metrics.log",
    run:
        step(rule, steps.write_run_metrics, input, output, params, log, resources)


rule peak:
    input:
        env=ENV_RECORD,
        apart=list(FRAMEWORK_ENVS.values()),
    output:
        TABLE["peak"],
    log:
        f"{LOGS}/peak.log",
    threads: workflow.cores
    resources:
        cpus_per_task=cfg.job_threads(config),  # Slurm CPUs per rank, as the srun launcher asks
    params:
        python=sys.executable,
        # every config value the measurement reads: a change remakes the peak table (and MFU with it)
        settings=json.dumps(peak.rule_settings(config), sort_keys=True),
        # each framework that runs apart is measured in its own Python
        apart=json.dumps(FRAMEWORK_ENVS, sort_keys=True),
    run:
        step(rule, rule_steps.peak_rule, input, output, params, log, resources)


rule flops:
    input:
        env=FLOPS_ENV,
    output:
        TABLE["flops"],
    log:
        f"{LOGS}/flops.log",
    params:
        framework=FLOPS_COUNTER,
        models=config["model"],
        image_size=config["image_size"],
        classes=config["classes"],
    run:
        step(rule, steps.write_flops, input, output, params, log, resources)


rule summary:
    input:
        run_metrics=TABLE["run_metrics"],
        runs=TABLE["runs"],
        peak=TABLE["peak"],
        flops=TABLE["flops"],
        plan=[TABLE["second_pass"]] if SECOND_PASS else [],
        looks=looks_done,
    output:
        summary=report(TABLE["summary"], caption="../report/summary.rst", category="Tables"),
        comparisons=TABLE["comparisons"],
        blocks=TABLE["blocks"],
        sequential=TABLE["sequential"],
    log:
        f"{LOGS}/summary.log",
    params:
        alpha=ALPHA,
        until_resolved=json.dumps(UNTIL_RESOLVED or {}),
        repeats=config["repeats"],
    run:
        step(rule, steps.write_summary, input, output, params, log, resources)


rule figures:
    input:
        summary=TABLE["summary"],
        comparisons=TABLE["comparisons"],
    output:
        reported(FIGURES, "Figures"),
    log:
        f"{LOGS}/figures.log",
    run:
        step(rule, steps.write_figures, input, output, params, log, resources)


# Every study has the replays' table, empty without `replay`.
rule replay_tables:
    input:
        list(REPLAYS),
    output:
        TABLE["replayed"],
    log:
        f"{LOGS}/replay_tables.log",
    params:
        replays=[{"path": path, "nodes": n} for path, n in REPLAYS.items()],
    run:
        step(rule, steps.write_replayed, input, output, params, log, resources)


rule model:
    input:
        run_metrics=TABLE["run_metrics"],
        runs=TABLE["runs"],
        tensors=TABLE["tensors"],
        sweep=TABLE["allreduce"],
        fit=TABLE["allreduce_fit"],
        replayed=TABLE["replayed"],
        plans=[REPLAY_PLANS] if REPLAYS else [],
        contention=TABLE["contention"],
    output:
        table=TABLE["model"],
        replay=TABLE["replay"],
        error=TABLE["model_error"],
        gradients=TABLE["gradients"],
        extrapolation=TABLE["extrapolation"],
        figures=reported(MODEL_FIGURES, "Performance model"),
    log:
        f"{LOGS}/model.log",
    params:
        extrapolate=json.dumps(config["extrapolate"], sort_keys=True),
    run:
        step(rule, steps.write_model, input, output, params, log, resources)


rule paper_report:
    input:
        summary=TABLE["summary"],
        comparisons=TABLE["comparisons"],
        blocks=TABLE["blocks"],
        sequential=TABLE["sequential"],
        runs=TABLE["runs"],
        environment=ENV_RECORD,
        apart=list(FRAMEWORK_ENVS.values()),
        error=TABLE["model_error"],
        model=TABLE["model"],
        fit=TABLE["allreduce_fit"],
        figures=FIGURES + MODEL_FIGURES,
    output:
        TABLE["report"],
    log:
        f"{LOGS}/report.log",
    params:
        title=TITLE,
        # the report says what was run from the whole config: any change to it remakes the report
        config=json.dumps(config, sort_keys=True, default=str),
    run:
        step(rule, steps.write_report, input, output, params, log, resources)
