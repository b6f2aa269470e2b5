"""PyTorch's Horovod binding as the study's communication instrument (the registry's REFERENCE):
the allreduce sweep (dlscale/runtime/allreduce.py) and the replay (dlscale/runtime/replay.py) hand Horovod tensors
through it. Horovod's core (negotiation, fusion, MPI or NCCL calls) is the same C++ code under
every binding; only the hand-over of the framework's tensors differs."""

import horovod.torch as hvd
import torch


class NoDevice(RuntimeError):
    """The rank has no GPU of its own."""


def start(comm, threads=None):
    """Horovod on the MPI communicator `comm` (and `threads` intra-op threads); the binding."""
    hvd.init(comm=comm)
    if threads:
        torch.set_num_threads(threads)
    return hvd


def ones(count):
    """A host tensor of `count` float32 ones (allreduced in place, averaged, it stays ones)."""
    return torch.ones(count)


def fused(comm, tensors):
    """Horovod's allreduce of host tensors: `tensors` tensors per message (fewer where the message
    has fewer float32 elements), in place, averaged (so the result stays 1 and each repetition
    reduces the same numbers). For a size, a callable that runs one and returns element 0."""
    start(comm)

    def prepare(nbytes):
        count = nbytes // 4
        pieces = min(tensors, count)
        bufs = [torch.ones(n) for n in [count // pieces] * (pieces - 1) + [count - count // pieces * (pieces - 1)]]

        def run():
            handles = [
                hvd.allreduce_async_(b, op=hvd.Average, name=f"sweep.{tensors}x.{nbytes}.{i}")
                for i, b in enumerate(bufs)
            ]
            for handle in handles:
                hvd.synchronize(handle)
            return bufs[0][0].item()

        return run

    return prepare, f"horovod mpi (host memory, {tensors} tensors fused)"


def on_gpu(comm):
    """Horovod's allreduce of CUDA tensors on the local rank's GPU (NCCL in the cuda environment),
    waiting for the GPU before the clock stops; NoDevice where the rank has no GPU."""
    start(comm)
    if torch.cuda.device_count() <= hvd.local_rank():
        raise NoDevice(
            f"allreduce sweep on device gpu: PyTorch {torch.__version__} sees "
            f"{torch.cuda.device_count()} GPU(s), local rank {hvd.local_rank()} needs one; "
            "run GPU studies on GPU nodes in the cuda environment (DLSCALE_ENV_VARIANT=cuda)"
        )
    torch.cuda.set_device(hvd.local_rank())

    def prepare(nbytes):
        buf = torch.ones(nbytes // 4, dtype=torch.float32, device="cuda")
        torch.cuda.synchronize()

        def run():
            out = hvd.allreduce(buf, op=hvd.Sum, name=f"sweep.{nbytes}")
            torch.cuda.synchronize()
            return out[0].item()

        return run

    nccl = "nccl" if hvd.nccl_built() else "mpi"
    return prepare, f"horovod {nccl} ({torch.cuda.get_device_name()})"
