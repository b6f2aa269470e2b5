# The workload environment (frameworks + Horovod + MPI bindings), built once per pin set and
# machine under ~/.cache/dlscale/envs and reused; this rule records which one the study uses.


rule environment:
    output:
        ENV_RECORD,
    log:
        f"{LOGS}/environment.log",
    params:
        python=sys.executable,
        # The environment's folder: a hash of its recipe, variant, Python and MPI. The study reruns
        # when the environment it runs in changes, not when dlscale/environment/recipe.py is merely edited.
        key=env.env_dir().name,
    run:
        step(rule, rule_process.environment, input, output, params, log, resources)
