"""dlscale: scaling studies of data-parallel deep-learning training across frameworks, ranks and nodes.

Layers, each importing only itself and those below: core < workloads (what runs under mpirun) < environment
< runtime (config, launching) < analysis (tables, model, figures, reports) < cli; workflow/ calls them."""

__version__ = "0.3.0"  # the one place (pyproject.toml reads it)
