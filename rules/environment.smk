# The workload environment (frameworks + Horovod + MPI bindings), built once per pin set and
# machine under ~/.cache/dlscale/envs and reused; this rule records which one the study uses.


rule environment:
    input:
        "harness/envspec.py",
    output:
        ENV_RECORD,
    log:
        f"{LOGS}/environment.log",
    params:
        python=sys.executable,
    shell:
        "{params.python} -m harness env build --record {output} > {log} 2>&1"
