# The workload environment (the pipeline's and the analysis' tools, numpy and mpi4py; no framework),
# built once per pin set and machine under ~/.cache/dlscale/envs and reused; this rule records which
# one the study uses.


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
        step(rule, rule_steps.environment, input, output, params, log, resources)


# Each framework of the study, in a Python of the user's (`environments`) or in its own environment
# (built here once per pin set): checked for what the study's runs of it need; the study stops here,
# naming what it lacks, before any run.
rule framework_environment:
    output:
        f"{RESULTS}/{paths.framework_environment('{framework}')}.json",
    log:
        f"{LOGS}/{paths.framework_environment('{framework}')}.log",
    params:
        python=lambda w: environments.python_of(config, w.framework),
        # a framework's own environment (not the user's Python) is built (once) before the check
        build=lambda w: environments.built_apart(config, w.framework),
        needs=lambda w: json.dumps({"framework": w.framework, "needs": environments.needs(config, w.framework)}),
    run:
        step(rule, rule_steps.framework_environment, input, output, params, log, resources)
