"""The study's shared words, each defined once: a run's and a configuration's keys, phases, run folder files."""

# A config's study dimensions: one run per combination and repeat (threads_per_rank may be a list).
MATRIX_KEYS = ("framework", "model", "allreduce_schedule", "allreduce_library", "layout", "timing")
MATRIX_KEYS += ("nodes", "ranks_per_node", "batch_size", "loader_workers", "threads_per_rank")
# What identifies a run (config keys, record fields, table columns), in the tables' order: threads_per_rank
# among the fixed settings, where it was before it could vary.
RUN_KEYS = [*MATRIX_KEYS[:-1], "image_size", "classes", "threads_per_rank", "precision", "repeat"]
# Keys renamed in 0.3.0 (`comm` is now the phase only): a config with one is refused; old records are renamed.
RENAMED_KEYS = {"comm": "allreduce_schedule", "comm_library": "allreduce_library"}


def renamed(fields):
    """A run's fields (a spec, a status, a record) with keys of before 0.3.0 under today's names."""
    return {RENAMED_KEYS.get(k, k): v for k, v in fields.items()}


CONFIG_KEYS = [k for k in RUN_KEYS if k != "repeat"]
# What the block model compares within a configuration (its cells); a block runs a configuration's cells back to back.
CELL = ["framework", "allreduce_library"]
# A configuration's 1-rank baseline (for speedup, efficiency and the performance model) shares these.
BASELINE_KEYS = [k for k in CONFIG_KEYS if k not in ("nodes", "ranks_per_node")]
# Columns of the tables that are text whatever they hold: a commit's short hash of digits alone (3759273)
# would read as a number, one with a leading zero or an "e" as another commit (123456, 1.234e56).
TEXT_COLUMNS = {"dlscale_commit": str}

# The SGD phases of an iteration, and the communication columns native runs' traces add.
IO, H2D, FORWARD, BACKWARD, COMM, UPDATE = PHASES = ("io", "h2d", "forward", "backward", "comm", "update")
COMM_TOTAL, OVERLAP = "comm_total", "overlap"
PHASE_COLUMNS = PHASES + (COMM_TOTAL, OVERLAP)


def seconds(phase):
    """A phase's column in the records and the per-iteration tables (seconds)."""
    return f"{phase}_s"


PHASE_SECONDS = tuple(seconds(p) for p in PHASES)  # the phases' columns in a step record
IO_S, H2D_S, FORWARD_S, BACKWARD_S, COMM_S, UPDATE_S = PHASE_SECONDS

# Horovod's defaults for tensor fusion (HOROVOD_FUSION_THRESHOLD, HOROVOD_CYCLE_TIME).
FUSION_THRESHOLD_BYTES = 128 * 1024 * 1024
CYCLE_TIME_S = 1e-3
# The model's step for a library that allreduces each buffer once full (DDP, tf.distribute, JAX): no cycle.
NO_CYCLE_S = 1e-6

# The job's hosts, rank 0's first, in every rank's environment (a library meeting at rank 0 connects there).
HOSTS_ENV = "DLSCALE_HOSTS"
# A run folder's files. ATTEMPT: the outcome, kept when redone (Snakemake deletes STATUS first), and all an
# interrupted run writes.
SPEC = "spec.json"
STATUS = "status.json"
ATTEMPT = "attempt.json"
LOG = "launch.log"  # a copy of the run's log (mpirun and every rank's output), kept with the attempt
TIMELINE = "timeline.json"  # Horovod's timeline of a phased run's measured iterations (rank 0)


def records_name(rank):
    return f"rank{rank}.jsonl"


def trace_name(rank):
    return f"trace_rank{rank}.json"
