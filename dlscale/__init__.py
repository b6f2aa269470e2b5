"""dlscale: scaling studies of data-parallel deep-learning training across frameworks, ranks and nodes.

Its layers, each importing only its own and those below it: core (vocabulary, results tree, records,
hardware) < workloads (what runs under mpirun, the frameworks) < environment (building them) <
runtime (config, launching, clusters) < analysis (tables, model, figures, reports) < cli; workflow/
is the Snakemake pipeline that calls them.
"""

__version__ = "0.3.0"  # the one place (pyproject.toml reads it)
