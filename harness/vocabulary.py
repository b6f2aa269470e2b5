"""The study's shared words, each defined once: what identifies a run and a configuration, the SGD
phases, the frameworks, and the files of a run folder. The runtime (harness), the workloads and the
analysis import them from here."""

FRAMEWORKS = ("torch", "tensorflow", "mxnet")

# A config's study dimensions: one run per combination (and repeat).
MATRIX_KEYS = (
    "framework",
    "model",
    "comm",
    "layout",
    "timing",
    "nodes",
    "ranks_per_node",
    "batch_size",
    "loader_workers",
)
# What identifies a run: each is a config key, a record field and a table column.
RUN_KEYS = [
    "framework",
    "model",
    "comm",
    "layout",
    "timing",
    "nodes",
    "ranks_per_node",
    "batch_size",
    "loader_workers",
    "image_size",
    "classes",
    "threads_per_rank",
    "precision",
    "repeat",
]
# A configuration: a run without its repeat.
CONFIG_KEYS = [k for k in RUN_KEYS if k != "repeat"]
# A configuration's 1-rank baseline (for speedup, efficiency and the performance model) shares these.
BASELINE_KEYS = [k for k in CONFIG_KEYS if k not in ("nodes", "ranks_per_node")]

# The SGD phases of an iteration, and the communication columns native runs' traces add.
PHASES = ("io", "h2d", "forward", "backward", "comm", "update")
PHASE_COLUMNS = PHASES + ("comm_total", "overlap")

# Horovod's defaults for tensor fusion (HOROVOD_FUSION_THRESHOLD, HOROVOD_CYCLE_TIME), which the
# tables record per run and the performance model replays.
FUSION_THRESHOLD_BYTES = 128 * 1024 * 1024
CYCLE_TIME_S = 1e-3

# The files of a run folder.
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
