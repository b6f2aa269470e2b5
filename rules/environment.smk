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
        # when the environment it runs in changes, not when harness/envspec.py is merely edited.
        key=env.env_dir().name,
    run:
        # no shell: the results and logs folders may hold spaces or quotes
        with open(log[0], "w") as fh:
            subprocess.run([params.python, "-m", "harness", "env", "build", "--record", output[0]],
                           stdout=fh, stderr=subprocess.STDOUT, check=True)
