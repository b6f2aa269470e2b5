# The workload environment (frameworks + Horovod + MPI bindings), built once per pin set and
# machine under ~/.cache/dlscale/envs and reused; this rule records which one the study uses.
ENV_RECORD = f"{RESULTS}/environment.json"


rule environment:
    input:
        "harness/envspec.py",
    output:
        ENV_RECORD,
    log:
        f"{LOGS}/environment.log",
    shell:
        "{PY} -m harness env build --record {output} > {log} 2>&1"
