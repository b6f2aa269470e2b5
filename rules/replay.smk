# Replay of the study's 1-rank runs' gradient traffic on more nodes than it ran on (harness/replay.py):
# the plans from the tables, one replay per node count, each on its own (emulated) cluster. A
# replay that fails says why in its output; the study goes on.


localrules:
    replay_plans,


rule replay_plans:
    input:
        tidy=f"{RESULTS}/tidy.csv",
        runs=f"{RESULTS}/runs.csv",
        tensors=f"{RESULTS}/tensors.csv",
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
        out=f"{RESULTS}/replay/nodes{{nodes}}.jsonl",
        spec=f"{RESULTS}/replay/nodes{{nodes}}.spec.json",
    log:
        f"{LOGS}/replay/nodes{{nodes}}.log",
    threads: workflow.cores
    params:
        settings=json.dumps({k: config[k] for k in ("replay", "launcher")}, sort_keys=True),
        attempts=lambda w: f"{RESULTS}/attempts/replay/nodes{w.nodes}",
    run:
        launch.replay_rule(config, wildcards, input, output, log, params)
