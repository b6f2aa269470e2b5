"""The study's shared words, each defined once: what identifies a run and a configuration, the SGD
phases and the files of a run folder. Every layer above imports them from here (the frameworks'
list is the registry's, dlscale/workloads/frameworks/__init__.py)."""

# A config's study dimensions: one run per combination (and repeat).
MATRIX_KEYS = (
    "framework",
    "model",
    "allreduce_schedule",
    "allreduce_library",
    "layout",
    "timing",
    "nodes",
    "ranks_per_node",
    "batch_size",
    "loader_workers",
    "threads_per_rank",  # one number (the common case) or a list: "one big device or several small"
)
# What identifies a run: each is a config key, a record field and a table column (in the tables'
# order: the threads after the settings a study holds fixed, where they were before they could vary).
RUN_KEYS = [
    *MATRIX_KEYS[:-1],
    # settings that a study holds fixed, and the repeat
    "image_size",
    "classes",
    "threads_per_rank",
    "precision",
    "repeat",
]
# Keys renamed in 0.3.0, old -> new (one word, one meaning: `comm` is the communication phase only).
# A config with an old key is refused naming the new one; records, run files and tables of an older
# study are read with the new names (`renamed`), so nothing measured before is lost.
RENAMED_KEYS = {"comm": "allreduce_schedule", "comm_library": "allreduce_library"}


def renamed(fields):
    """A run's fields (a spec, a status, a record) with keys of before 0.3.0 under today's names."""
    return {RENAMED_KEYS.get(k, k): v for k, v in fields.items()}


# A configuration: a run without its repeat.
CONFIG_KEYS = [k for k in RUN_KEYS if k != "repeat"]
# A configuration's 1-rank baseline (for speedup, efficiency and the performance model) shares these.
BASELINE_KEYS = [k for k in CONFIG_KEYS if k not in ("nodes", "ranks_per_node")]

# The SGD phases of an iteration, and the communication columns native runs' traces add.
IO, H2D, FORWARD, BACKWARD, COMM, UPDATE = PHASES = ("io", "h2d", "forward", "backward", "comm", "update")
COMM_TOTAL, OVERLAP = "comm_total", "overlap"
PHASE_COLUMNS = PHASES + (COMM_TOTAL, OVERLAP)


def seconds(phase):
    """A phase's column in the records and the per-iteration tables (seconds)."""
    return f"{phase}_s"


PHASE_SECONDS = tuple(seconds(p) for p in PHASES)  # the phases' columns in a step record
IO_S, H2D_S, FORWARD_S, BACKWARD_S, COMM_S, UPDATE_S = PHASE_SECONDS

# Horovod's defaults for tensor fusion (HOROVOD_FUSION_THRESHOLD, HOROVOD_CYCLE_TIME), which the
# tables record per run and the performance model replays.
FUSION_THRESHOLD_BYTES = 128 * 1024 * 1024
CYCLE_TIME_S = 1e-3
# A library that starts each buffer's allreduce as soon as it is full has no cycle (a framework's own:
# DistributedDataParallel, tf.distribute, JAX's collectives): the model steps it by this.
NO_CYCLE_S = 1e-6

# The files of a run folder.
# The job's hosts, rank 0's first, in every rank's environment (mpirun; under srun Slurm places the
# ranks): what a library that meets at rank 0 connects to (JAX's coordination service).
HOSTS_ENV = "DLSCALE_HOSTS"
SPEC = "spec.json"
STATUS = "status.json"
# The same outcome, kept with the attempt when the run is redone (Snakemake deletes status.json first);
# an interrupted run writes this one only.
ATTEMPT = "attempt.json"
LOG = "launch.log"  # a copy of the run's log (mpirun and every rank's output), kept with the attempt
TIMELINE = "timeline.json"  # Horovod's timeline of a phased run's measured iterations (rank 0)


def records_name(rank):
    return f"rank{rank}.jsonl"


def trace_name(rank):
    return f"trace_rank{rank}.json"
