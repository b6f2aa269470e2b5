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
        step("replay_plans", steps.write_replay_plans, files(input), output[0], params.models, log[0])


rule replay:
    input:
        env=ENV_RECORD,
        hostfile=config["hostfile"],
        plans=REPLAY_PLANS,
    output:
        out=f"{RESULTS}/{paths.replay('{nodes}')}.jsonl",
        spec=f"{RESULTS}/{paths.replay('{nodes}')}.spec.json",
    log:
        f"{LOGS}/{paths.replay('{nodes}')}.log",
    threads: workflow.cores
    resources:
        cpus_per_task=max(cfg.threads(config)),  # Slurm CPUs per rank, as the srun launcher asks
    params:
        settings=json.dumps({k: config[k] for k in ("replay", "launcher")}, sort_keys=True),
        attempts=lambda w: f"{RESULTS}/{paths.attempts(paths.replay(w.nodes))}",
    run:
        rule_process.replay_rule(config, wildcards, input, output, log, params)
