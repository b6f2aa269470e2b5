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
        report.write_tables(list(input), output.tidy, output.runs, output.tensors, log[0])


rule summary:
    input:
        tidy=f"{RESULTS}/tidy.csv",
        runs=f"{RESULTS}/runs.csv",
    output:
        f"{RESULTS}/summary.csv",
    log:
        f"{LOGS}/summary.log",
    run:
        report.write_summary(input.tidy, input.runs, output[0], log[0])


rule figures:
    input:
        f"{RESULTS}/summary.csv",
    output:
        FIGURES,
    log:
        f"{LOGS}/figures.log",
    run:
        report.write_figures(input[0], list(output), log[0])


rule model:
    input:
        tidy=f"{RESULTS}/tidy.csv",
        runs=f"{RESULTS}/runs.csv",
        tensors=f"{RESULTS}/tensors.csv",
        sweep=f"{RESULTS}/allreduce.csv",
        fit=f"{RESULTS}/allreduce_fit.csv",
    output:
        table=f"{RESULTS}/model.csv",
        error=f"{RESULTS}/model_error.json",
        gradients=f"{RESULTS}/gradients.csv",
        extrapolation=f"{RESULTS}/extrapolation.csv",
        figures=MODEL_FIGURES,
    log:
        f"{LOGS}/model.log",
    params:
        extrapolate=json.dumps(config["extrapolate"], sort_keys=True),
    run:
        report.write_model(input, output, config["extrapolate"], log[0])
