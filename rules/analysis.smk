# Records -> tidy table and run table -> summary -> figures; with the allreduce fit -> model.


rule tidy:
    input:
        RUNS,
    output:
        tidy=f"{RESULTS}/tidy.csv",
        runs=f"{RESULTS}/runs.csv",
        tensors=f"{RESULTS}/tensors.csv",
    log:
        f"{LOGS}/tidy.log",
    run:
        step("tidy", steps.write_tables, list(input), output.tidy, output.runs, output.tensors, log[0])


rule peak:
    input:
        env=ENV_RECORD,
    output:
        f"{RESULTS}/peak.csv",
    log:
        f"{LOGS}/peak.log",
    threads: workflow.cores
    params:
        python=sys.executable,
    run:
        step("peak", steps.measure_peak, config, params.python, output[0], log[0])


rule summary:
    input:
        tidy=f"{RESULTS}/tidy.csv",
        runs=f"{RESULTS}/runs.csv",
        peak=f"{RESULTS}/peak.csv",
    output:
        report(f"{RESULTS}/summary.csv", caption="../report/summary.rst", category="Tables"),
    log:
        f"{LOGS}/summary.log",
    run:
        step("summary", steps.write_summary, input.tidy, input.runs, output[0], log[0], input.peak)


rule figures:
    input:
        f"{RESULTS}/summary.csv",
    output:
        reported(FIGURES, "Figures"),
    log:
        f"{LOGS}/figures.log",
    run:
        step("figures", steps.write_figures, input[0], list(output), log[0])


rule model:
    input:
        tidy=f"{RESULTS}/tidy.csv",
        runs=f"{RESULTS}/runs.csv",
        tensors=f"{RESULTS}/tensors.csv",
        sweep=f"{RESULTS}/allreduce.csv",
        fit=f"{RESULTS}/allreduce_fit.csv",
        replays=list(REPLAYS),
        plans=[REPLAY_PLANS] if REPLAYS else [],
    output:
        table=f"{RESULTS}/model.csv",
        replay=f"{RESULTS}/replay.csv",
        error=f"{RESULTS}/model_error.json",
        gradients=f"{RESULTS}/gradients.csv",
        extrapolation=f"{RESULTS}/extrapolation.csv",
        figures=reported(MODEL_FIGURES, "Performance model"),
    log:
        f"{LOGS}/model.log",
    params:
        extrapolate=json.dumps(config["extrapolate"], sort_keys=True),
    run:
        step("model", steps.write_model, files(input), files(output), config["extrapolate"], REPLAYS, log[0])


rule paper_report:
    input:
        summary=f"{RESULTS}/summary.csv",
        runs=f"{RESULTS}/runs.csv",
        environment=ENV_RECORD,
        error=f"{RESULTS}/model_error.json",
        model=f"{RESULTS}/model.csv",
        figures=FIGURES + MODEL_FIGURES,
    output:
        f"{RESULTS}/report.md",
    log:
        f"{LOGS}/report.log",
    run:
        step("paper_report", steps.write_report, files(input), files(output), config, log[0])
