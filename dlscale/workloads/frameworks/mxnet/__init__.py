"""MXNet's declarations, read without importing it (dlscale/workloads/frameworks/__init__.py)."""

from dlscale.core.vocabulary import BACKWARD, UPDATE

NAME = "mxnet"
LABEL = "MXNet"
MODULES = ("mxnet",)

LAYOUTS = ("NCHW",)
BEST_LAYOUT = "NCHW"
LAYOUT_NOTE = "MXNet 1.9.1's CPU convolutions (MKLDNN) run NCHW, and the MXNet models are written NCHW"

LIBRARIES = ("horovod",)
NATIVE = None
NOT_BUILT = {
    "native": "MXNet's own distributed path is a parameter server (kvstore dist_sync) with its own launcher, not built"
}

# Its OpenMP pools (its oneDNN kernels) and its engine workers, read at import.
THREAD_ENV = ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "MXNET_CPU_WORKER_NTHREADS")
LOADER = "mx.io.ImageRecordIter, preprocess threads, OpenCV decode"
HOROVOD_MODULE = "horovod.mxnet"
DATA_MODULES = ()

# Bulked operators are one event, their names joined by commas.
TRACE_RULES = [
    ("contains", "_backward_", BACKWARD),
    ("contains", "sgd_", UPDATE),
    *[("prefix", name, "ignore") for name in ("horovod", "DeleteVariable", "WaitForVar", "WaitForAll")],
]


def trace_rest(event):
    """Any other operation: placed by its position in the iteration (before backward, or after it)."""
    return "compute"
