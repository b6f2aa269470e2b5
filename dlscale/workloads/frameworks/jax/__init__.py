"""JAX: what the study needs to know of it without importing it (dlscale/workloads/frameworks/__init__.py)."""

from dlscale.core.vocabulary import BACKWARD, COMM, FORWARD, UPDATE
from dlscale.workloads.frameworks import tfdata

NAME = "jax"
LABEL = "JAX"
MODULES = ("jax", "jaxlib", "flax", "optax")

# NHWC, XLA's natural layout on the CPU and the one Flax's layers are written in.
LAYOUTS = ("NHWC",)
BEST_LAYOUT = "NHWC"
LAYOUT_NOTE = (
    "Flax's convolutions take NHWC (XLA chooses the layout it computes in), and the JAX models are written NHWC"
)

# JAX's gradients take JAX's own collectives: the allreduce sweep measures them on a path of this
# name (sweep.py), and the model predicts JAX runs from it.
LIBRARIES = ("native",)
NATIVE = "jax.distributed + XLA's collectives (gloo on the CPU, NCCL on GPUs)"
NOT_BUILT = {"horovod": "Horovod has no JAX binding"}

# Tests make one rank slow on purpose: "<rank>:<seconds>" sleeps that rank before each barrier of
# collectives.py (named here, where the tests' interpreter, which has no JAX, can read it).
SLOW_RANK_ENV = "DLSCALE_SLOW_RANK"

# The environment variables that hold a rank's compute to `threads_per_rank` threads, set by the
# launcher for every rank and by the probe (frameworks.thread_env): the PJRT CPU client's pool (read
# as the backend starts; `hold_threads` sets it with XLA_FLAGS).
THREAD_ENV = ("PJRT_NPROC",)
LOADER = "tf.data TFRecordDataset as JAX's own examples feed it, to numpy (as_numpy_iterator)"
# What its runs import besides MODULES: Horovod's binding (allreduce_library horovod), the loader's (data: images).
DATA_MODULES = tfdata.MODULES  # its loader is tf.data (frameworks/tfdata.py): TensorFlow itself


# The profile's operations carry their phase in their names (profile.py renames them from the
# compiled module's metadata); the gradients' mean is JAX's own collective, so it is communication
# here, not in a Horovod timeline.
def hold_threads(threads):
    """Hold JAX's CPU compute to `threads` threads, before JAX starts its backend (the trainer's, the
    probe's and the bare loop's alike): XLA's intra-op pool (`xla_flags`), and the PJRT CPU client's
    own pool, which sizes itself from PJRT_NPROC where it is set, else from every CPU the process may
    run on. Measured (jax 0.10.2, a 2-core VM, 2026-11-27, 2048^2 matmul at 1 thread): the flags alone
    left the probe on 1.97 cores; with PJRT_NPROC=1, 1.00 (bench/results/cores.csv)."""
    import os

    os.environ["XLA_FLAGS"] = xla_flags(threads)
    os.environ["PJRT_NPROC"] = str(threads)


def xla_flags(threads):
    """XLA_FLAGS for `threads` compute threads per rank on the CPU (set before JAX starts its
    backend), added to any the user set: the trainer's, the probe's and the bare loop's alike."""
    import os

    ours = "--xla_cpu_multi_thread_eigen=false intra_op_parallelism_threads=1" if threads == 1 else ""
    return " ".join(f for f in (os.environ.get("XLA_FLAGS", ""), ours) if f)


TRACE_RULES = [
    ("prefix", "xla:forward/", FORWARD),
    ("prefix", "xla:backward/", BACKWARD),
    ("prefix", "xla:update/", UPDATE),
    ("prefix", f"xla:{COMM}/", COMM),
]


def trace_rest(event):
    """Anything else (dispatch, the runtime's own spans) is not an operation."""
    return None
