"""dlscale: scaling studies of data-parallel deep-learning training across frameworks, ranks and nodes.

The package is layered; a module imports only from its own layer and the layers below it
(tests/test_architecture.py checks it), bottom to top:
  core         the vocabulary (keys, phases, run-folder files), the results tree, records, samples,
               timelines, a host's hardware: imports nothing of the project
  workloads    what runs under mpirun: the training program, the dataset, the models' registry and
               the frameworks, each one package under workloads/frameworks/ (its pins too)
  environment  builds and finds the environments: the workload environment's pins, each framework's
               own from its package's PINS, Horovod
  runtime      config, hostfiles, launching runs, emulated and Slurm clusters, the allreduce sweep,
               the replay, the peak, the process that does a pipeline rule's work
  analysis     tables, metrics, comparisons, the performance model, figures, reports
  cli          the `dlscale` command
and workflow/, the Snakemake pipeline that calls them (not a Python layer).
"""

# The version, in one place (pyproject.toml reads it; docs/changelog.md has an entry for it).
__version__ = "0.3.0"
