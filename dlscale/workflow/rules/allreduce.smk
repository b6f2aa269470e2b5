# The allreduce sweep on the study's hosts and ranks (mpi4py), and the ring model fitted to it.
# A sweep that fails says why in its output; the study goes on.


rule allreduce:
    input:
        env=ENV_RECORD,
        hostfile=config["hostfile"],
    output:
        f"{RESULTS}/{paths.sweep('{nodes}', '{ranks_per_node}')}.jsonl",
    log:
        f"{LOGS}/{paths.sweep('{nodes}', '{ranks_per_node}')}.log",
    threads: workflow.cores
    resources:
        cpus_per_task=max(cfg.threads(config)),  # Slurm CPUs per rank, as the srun launcher asks
    params:
        settings=json.dumps({k: config[k] for k in ("allreduce_max_bytes", "launcher")}, sort_keys=True),
        attempts=lambda w: f"{RESULTS}/{paths.attempts(paths.sweep(w.nodes, w.ranks_per_node))}",
    run:
        rule_process.sweep_rule(config, wildcards, input, output, log, params)


rule allreduce_tables:
    input:
        list(SWEEPS),
    output:
        sweep=TABLE["allreduce"],
        fit=TABLE["allreduce_fit"],
    log:
        f"{LOGS}/allreduce_tables.log",
    run:
        step("allreduce_tables", steps.write_comm, SWEEPS, output.sweep, output.fit, log[0])
