"""PyTorch's declarations, read without importing it (dlscale/workloads/frameworks/__init__.py)."""

from dlscale.core.vocabulary import BACKWARD, COMM, UPDATE

NAME = "torch"
LABEL = "PyTorch"
MODULES = ("torch",)

# channels_last (NHWC) for convolutional networks, on the CPU (oneDNN's blocked kernels; measured
# ResNet-50 1.57x, GoogLeNet 1.43x: bench/layout.py) and on GPUs (cuDNN's NHWC Tensor Core kernels).
LAYOUTS = ("NCHW", "NHWC")
BEST_LAYOUT = "NHWC"
LAYOUT_NOTE = None

# Horovod (the study's reference path) or PyTorch's own DistributedDataParallel.
LIBRARIES = ("horovod", "native")
NATIVE = "torch.distributed DistributedDataParallel (gloo on the CPU, NCCL on GPUs)"
NOT_BUILT = {}

# Its OpenMP pools (oneDNN runs on OpenMP); the trainer also calls torch.set_num_threads.
THREAD_ENV = ("OMP_NUM_THREADS", "MKL_NUM_THREADS")
LOADER = "torch.utils.data.DataLoader, worker processes, Pillow decode"
HOROVOD_MODULE = "horovod.torch"
DATA_MODULES = ("PIL",)  # its loader decodes with Pillow

# (test, text, class), first match wins; "ignore" drops containers (dlscale/analysis/trace.py).
TRACE_RULES = [
    ("prefix", "autograd::engine::evaluate_function", BACKWARD),
    ("prefix", "Optimizer.step", UPDATE),
    ("prefix", "Optimizer.zero_grad", UPDATE),
    ("prefix", "ProfilerStep", "ignore"),
    ("prefix", "cuda", "ignore"),  # runtime API calls (cudaLaunchKernel, ...) on the host
    # allreduce_library native: the process group's collectives, their enqueue and DDP's reducer work
    ("prefix", "DistributedDataParallel.forward", "ignore"),  # a container of the forward pass
    *[("prefix", op, COMM) for op in ("gloo:", "nccl:", "c10d::")],
    *[("prefix", op, COMM) for op in ("torch::distributed::reducer", "torch.distributed.ddp.reducer")],
]


def trace_rest(event):
    """Any other operation: placed by its position in the iteration (before backward, or after it)."""
    return "compute"
