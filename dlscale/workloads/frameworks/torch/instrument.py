"""PyTorch's Horovod binding as the communication instrument of the allreduce sweep and the replay.

Every instrument (start, ones, submit, wait, first) hands tensors over as its framework's distributed
optimizer does (bench/instruments.py measures it); PyTorch's alone also reduces CUDA tensors (on_gpu)."""

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


def submit(tensors, names):
    """Start Horovod's averaging allreduce of each of `tensors` in place, as DistributedOptimizer does."""
    return [hvd.allreduce_async_(t, op=hvd.Average, name=n) for t, n in zip(tensors, names)]


def wait(handle):
    """The reduced tensors of a `submit`, once Horovod has reduced them."""
    return [hvd.synchronize(h) for h in handle]


def first(tensor):
    return float(tensor[0])


def on_gpu(comm):
    """Horovod's allreduce of CUDA tensors on the local rank's GPU, waited for; NoDevice where the rank has none."""
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
