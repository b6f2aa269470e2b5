# The allreduce sweep on the study's hosts and ranks (mpi4py), and the ring model fitted to it.
# A sweep that fails says why in its output; the study goes on.


rule allreduce:
    input:
        env=INSTRUMENT_ENV,
        apart=list(SWEPT_APART.values()),
        hostfile=config["hostfile"],
    output:
        f"{RESULTS}/{paths.sweep('{nodes}', '{ranks_per_node}')}.jsonl",
    log:
        f"{LOGS}/{paths.sweep('{nodes}', '{ranks_per_node}')}.log",
    threads: workflow.cores
    resources:
        cpus_per_task=cfg.job_threads(config),  # Slurm CPUs per rank, as the srun launcher asks
        run_timeout_s=RUN_TIMEOUT,
    params:
        place=lambda w: {"nodes": int(w.nodes), "ranks_per_node": int(w.ranks_per_node)},
        settings=json.dumps(cfg.sweep_settings(config), sort_keys=True),
        attempts=lambda w: f"{RESULTS}/{paths.attempts(paths.sweep(w.nodes, w.ranks_per_node))}",
        apart=json.dumps(SWEPT_APART, sort_keys=True),
    run:
        step(rule, rule_steps.allreduce, input, output, params, log, resources)


rule allreduce_tables:
    input:
        list(SWEEPS),
    output:
        sweep=TABLE["allreduce"],
        fit=TABLE["allreduce_fit"],
    log:
        f"{LOGS}/allreduce_tables.log",
    params:
        sweeps=[{"path": path, "nodes": n, "ranks_per_node": r} for path, (n, r) in SWEEPS.items()],
    run:
        step(rule, steps.write_comm, input, output, params, log, resources)
