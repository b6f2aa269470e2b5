# The training images (data: {kind: images}): generated (or the user's folder), every file checked,
# and written in each framework's record format, once per recipe under the data cache; every study
# asking for the same images reuses them. Synthetic data needs none of this.


localrules:
    dataset,


rule dataset:
    output:
        DATA_MANIFEST,
    log:
        f"{LOGS}/dataset.log",
    threads: workflow.cores
    params:
        python=sys.executable,
        data=json.dumps(cfg.dataset_settings(config), sort_keys=True),
    run:
        step(rule, rule_process.dataset_rule, input, output, params, log, resources)
