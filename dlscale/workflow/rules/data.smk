# The training images (data: {kind: images}): generated (or the user's folder), every file checked,
# and written in the record formats of the study's frameworks (each in its framework's Python), once
# per recipe under the data cache; every study asking for the same images reuses them (a study with
# other frameworks checks the images again and adds its formats; those written before stay in the
# manifest). Synthetic data needs none of this.


localrules:
    dataset,


rule dataset:
    input:
        [FRAMEWORK_ENVS[fw] for fw in DATA_WRITERS],
    output:
        DATA_MANIFEST,
    log:
        f"{LOGS}/dataset.log",
    threads: workflow.cores
    params:
        python=sys.executable,
        data=json.dumps(cfg.dataset_settings(config), sort_keys=True),
        writers=json.dumps(DATA_WRITERS, sort_keys=True),
    run:
        step(rule, rule_steps.dataset_rule, input, output, params, log, resources)
