"""The study's runtime: config and its validation, hostfiles, the run matrix and order, launching a
run (launchers, emulated and Slurm clusters), the allreduce sweep, the replay, the matrix-multiply
peak, and the process that does a pipeline rule's work. Above the workloads, below the analysis."""
