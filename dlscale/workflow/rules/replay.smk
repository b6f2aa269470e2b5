# Replay of the study's 1-rank runs' gradient traffic on more nodes than it ran on (dlscale/runtime/replay.py):
# the plans from the tables, one replay per node count, each on its own (emulated) cluster. A
# replay that fails says why in its output; the study goes on.


localrules:
    replay_plans,


rule replay_plans:
    input:
        run_metrics=TABLE["run_metrics"],
        runs=TABLE["runs"],
        tensors=TABLE["tensors"],
    output:
        REPLAY_PLANS,
    log:
        f"{LOGS}/replay_plans.log",
    params:
        models=config["replay"]["models"],
    run:
        step(rule, steps.write_replay_plans, input, output, params, log, resources)


rule replay:
    input:
        env=INSTRUMENT_ENV,
        hostfile=config["hostfile"],
        plans=REPLAY_PLANS,
    output:
        out=f"{RESULTS}/{paths.replay('{nodes}')}.jsonl",
        spec=f"{RESULTS}/{paths.replay('{nodes}')}.spec.json",
    log:
        f"{LOGS}/{paths.replay('{nodes}')}.log",
    threads: workflow.cores
    resources:
        cpus_per_task=cfg.job_threads(config),  # Slurm CPUs per rank, as the srun launcher asks
        run_timeout_s=RUN_TIMEOUT,
    params:
        nodes=lambda w: int(w.nodes),
        settings=json.dumps(cfg.replay_settings(config), sort_keys=True),
        attempts=lambda w: f"{RESULTS}/{paths.attempts(paths.replay(w.nodes))}",
    run:
        step(rule, rule_steps.replay, input, output, params, log, resources)
