"""TensorFlow's declarations, read without importing it (dlscale/workloads/frameworks/__init__.py)."""

from dlscale.core.vocabulary import BACKWARD, COMM, FORWARD, UPDATE

NAME = "tensorflow"
LABEL = "TensorFlow"
MODULES = ("tensorflow", "keras")

LAYOUTS = ("NHWC",)
BEST_LAYOUT = "NHWC"
LAYOUT_NOTE = (
    "TensorFlow's CPU convolutions run NHWC only, and on GPUs its layout optimizer already "
    "converts NHWC convolutions to what cuDNN runs fastest; the TensorFlow models are NHWC"
)

LIBRARIES = ("horovod", "native")
NATIVE = "tf.distribute.MultiWorkerMirroredStrategy, collective all-reduce (ring over gRPC on the CPU, NCCL on GPUs)"
NOT_BUILT = {}

# None: its pools are set in the process (tf.config.threading), and oneDNN runs on them.
THREAD_ENV = ()
LOADER = "tf.data TFRecordDataset, parallel map (private thread pool), decode_and_crop_jpeg"
HOROVOD_MODULE = "horovod.tensorflow"
DATA_MODULES = ()

# Operation names are scope/node:OpType; the trainer names its scopes with these.
UPDATE_SCOPE, ALLREDUCE_SCOPE = UPDATE, "allreduce"  # the update scope is named after its phase
TRACE_RULES = [
    ("prefix", "gradient_tape/", BACKWARD),
    ("prefix", f"{UPDATE_SCOPE}/", UPDATE),
    # Horovod's ops are the enqueue only: the allreduce is in Horovod's timeline
    *[("contains", op, "ignore") for op in ("HorovodAllreduce", "HorovodGroupedAllreduce")],
    # allreduce_library native: each pack's collective all-reduce, its packing and averaging
    ("prefix", f"{ALLREDUCE_SCOPE}/", COMM),
]

# Host events that are executor, function-call, iterator or collective-runtime spans, not operations.
_SPANS = tuple(
    "Executor FunctionRun EagerExecute EagerLocalExecute EagerKernelExecute Iterator ThreadpoolListener "
    "KernelAndDeviceFunc CollectiveExecutor BaseCollectiveExecutor CollectiveOpV2Kernel $".split()
)


def trace_rest(event):
    """One compiled graph: any other operation (`node_name:OpType`) is the forward pass (the
    model's and the loss's), wherever the executor ran it (some gradient-shape work runs early)."""
    name = event.get("name", "")
    return FORWARD if ":" in name and not name.startswith(_SPANS) else None
