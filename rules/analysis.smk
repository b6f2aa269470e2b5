# Records -> tidy table and run table -> summary -> figures.


rule tidy:
    input:
        RUNS,
    output:
        tidy=f"{RESULTS}/tidy.csv",
        runs=f"{RESULTS}/runs.csv",
    log:
        f"{LOGS}/tidy.log",
    run:
        report.write_tables(input, output.tidy, output.runs)


rule summary:
    input:
        tidy=f"{RESULTS}/tidy.csv",
        runs=f"{RESULTS}/runs.csv",
    output:
        f"{RESULTS}/summary.csv",
    log:
        f"{LOGS}/summary.log",
    run:
        report.write_summary(input.tidy, input.runs, output[0])


rule figures:
    input:
        f"{RESULTS}/summary.csv",
    output:
        FIGURES,
    log:
        f"{LOGS}/figures.log",
    run:
        report.write_figures(input[0], f"{RESULTS}/figures")
