"""JAX's declarations, read without importing it (dlscale/workloads/frameworks/__init__.py)."""

import os

from dlscale.core.vocabulary import BACKWARD, COMM, FORWARD, UPDATE
from dlscale.workloads.frameworks import tfdata

NAME = "jax"
LABEL = "JAX"
MODULES = ("jax", "jaxlib", "flax", "optax")

LAYOUTS = ("NHWC",)
BEST_LAYOUT = "NHWC"
LAYOUT_NOTE = (
    "Flax's convolutions take NHWC (XLA chooses the layout it computes in), and the JAX models are written NHWC"
)

# JAX's own collectives, measured by the allreduce sweep on a path of this name (sweep.py).
LIBRARIES = ("native",)
NATIVE = "jax.distributed + XLA's collectives (gloo on the CPU, NCCL on GPUs)"
NOT_BUILT = {"horovod": "Horovod has no JAX binding"}

# Tests slow one rank: "<rank>:<seconds>[:<barrier>]" sleeps it before each barrier, or that one (here: the tests
# have no JAX).
SLOW_RANK_ENV = "DLSCALE_SLOW_RANK"

# The PJRT CPU client's pool, read as the backend starts (`hold_threads` sets it with XLA_FLAGS).
THREAD_ENV = ("PJRT_NPROC",)
LOADER = "tf.data TFRecordDataset as JAX's own examples feed it, to numpy (as_numpy_iterator)"
DATA_MODULES = tfdata.MODULES  # its loader is tf.data: TensorFlow itself


def hold_threads(threads):
    """Hold XLA's intra-op pool and the PJRT CPU client's to `threads` threads, before JAX starts its backend:
    with the flags alone the probe used 1.97 cores of 2 at 1 thread, with PJRT_NPROC=1 too 1.00 (jax 0.10.2,
    bench/results/cores.csv)."""
    os.environ["XLA_FLAGS"] = xla_flags(threads)
    os.environ["PJRT_NPROC"] = str(threads)


def xla_flags(threads):
    """XLA_FLAGS for `threads` compute threads per rank on the CPU, added to any the user set."""
    ours = "--xla_cpu_multi_thread_eigen=false intra_op_parallelism_threads=1" if threads == 1 else ""
    return " ".join(f for f in (os.environ.get("XLA_FLAGS", ""), ours) if f)


# The profile's operations carry their phase in their names (profile.py renames them `xla:<phase>/...`).
TRACE_RULES = [("prefix", f"xla:{phase}/", phase) for phase in (FORWARD, BACKWARD, UPDATE, COMM)]


def trace_rest(event):
    """Anything else (dispatch, the runtime's own spans) is not an operation."""
    return None
