# The allreduce sweep on the study's hosts and ranks (mpi4py), and the ring model fitted to it.
# A sweep that fails says why in its output; the study goes on.


rule allreduce:
    input:
        env=ENV_RECORD,
        hostfile=config["hostfile"],
    output:
        f"{RESULTS}/allreduce/nodes{{nodes}}_rpn{{ranks_per_node}}.jsonl",
    log:
        f"{LOGS}/allreduce/nodes{{nodes}}_rpn{{ranks_per_node}}.log",
    threads: workflow.cores
    params:
        settings=json.dumps({k: config[k] for k in ("allreduce_max_bytes", "launcher")}, sort_keys=True),
        attempts=lambda w: f"{RESULTS}/attempts/allreduce/nodes{w.nodes}_rpn{w.ranks_per_node}",
    run:
        launch.sweep_rule(config, wildcards, input, output, log, params)


rule allreduce_tables:
    input:
        list(SWEEPS),
    output:
        sweep=f"{RESULTS}/allreduce.csv",
        fit=f"{RESULTS}/allreduce_fit.csv",
    log:
        f"{LOGS}/allreduce_tables.log",
    run:
        step("allreduce_tables", steps.write_comm, SWEEPS, output.sweep, output.fit, log[0])
