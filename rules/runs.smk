# One MPI job per run. A run that fails (crash, lost rank, timeout, wrong results) is recorded as
# failed in its status.json with its logs kept; the study goes on. Runs take every core so that
# no two measurements overlap.
import json

from harness import launch

RUN_DIR = f"{RESULTS}/runs/{cfg.RUN_PATTERN}"
RUNS = [f"{RESULTS}/runs/{cfg.run_path(run)}/status.json" for run in cfg.matrix(config)]


wildcard_constraints:
    framework="[a-z0-9]+",
    model="[a-z0-9]+",
    comm="[a-z]+",
    nodes=r"\d+",
    ranks_per_node=r"\d+",
    batch_size=r"\d+",
    repeat=r"\d+",


def run_of(wildcards):
    return {k: (wildcards[k] if k in ("framework", "model", "comm") else int(wildcards[k]))
            for k in cfg.MATRIX_KEYS + ("repeat",)}


def run_settings():
    """Every setting a run's result depends on (a change re-runs the study)."""
    keys = ("image_size", "classes", "threads_per_rank", "precision", "warmup", "iterations",
            "lr", "momentum", "seed", "hostfile", "launcher")
    return json.dumps({k: config[k] for k in keys}, sort_keys=True)


rule run:
    input:
        env=ENV_RECORD,
        hostfile=config["hostfile"],
    output:
        f"{RUN_DIR}/status.json",
    log:
        f"{LOGS}/runs/{cfg.RUN_PATTERN}.log",
    params:
        settings=run_settings(),
    threads: workflow.cores
    run:
        one = run_of(wildcards)
        launch.launch(config, one, f"{RESULTS}/runs/{cfg.run_path(one)}", json.load(open(input.env)),
                      log[0], f"{RESULTS}/attempts/{cfg.run_path(one)}")
