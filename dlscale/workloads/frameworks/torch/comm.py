"""How PyTorch's gradients are averaged over the ranks (`allreduce_library`): Horovod or torch.distributed.

overlap: Horovod's DistributedOptimizer, or DistributedDataParallel (which waits for its buckets at the end
of backward, so a phased run's backward holds the exposed part); sequential: one allreduce after backward.
Batch-norm statistics stay each rank's own.
"""

import contextlib
import datetime
import os

import torch

from dlscale.core.vocabulary import NO_CYCLE_S
from dlscale.workloads import rendezvous
from dlscale.workloads.frameworks.torch import NATIVE

# DistributedDataParallel's bucket size (its default), recorded as the run's fusion threshold.
DDP_BUCKET_BYTES = 25 * 1024 * 1024
# How long a rank waits to meet its peers before it fails, saying where it tried.
MEET_TIMEOUT_S = 120


class DenseView:
    """A Horovod compressor (no compression): Horovod allreduces contiguous tensors only, so a
    channels_last gradient goes as its NHWC view (the same memory, reduced in place)."""

    @staticmethod
    def compress(t):
        if t.dim() == 4 and not t.is_contiguous() and t.is_contiguous(memory_format=torch.channels_last):
            return t.permute(0, 2, 3, 1), True
        return t, False

    @staticmethod
    def decompress(t, permuted):
        return t.permute(0, 3, 1, 2) if permuted else t


def dense(t):
    """The gradient's memory as a contiguous tensor (its NHWC view when channels_last)."""
    return DenseView.compress(t)[0]


class Horovod:
    name = "horovod"

    def __init__(self, gpu):
        import horovod.torch as hvd

        hvd.init()
        self.hvd = hvd
        self.rank, self.size, self.local_rank = hvd.rank(), hvd.size(), hvd.local_rank()

    def broadcast(self, model):
        self.hvd.broadcast_parameters(model.state_dict(), root_rank=0)  # Horovod takes contiguous tensors

    def wrap(self, model, optimizer, overlap):
        if overlap:
            optimizer = self.hvd.DistributedOptimizer(
                optimizer, named_parameters=model.named_parameters(), op=self.hvd.Average, compression=DenseView
            )
        return model, optimizer

    def wait(self, optimizer):
        optimizer.synchronize()

    def stepping(self, optimizer, overlap):
        return optimizer.skip_synchronize() if overlap else contextlib.nullcontext()

    def reduce(self, grads):
        self.hvd.grouped_allreduce_([dense(g) for g in grads], op=self.hvd.Average)

    def describe(self, overlap, grad_bytes):
        import horovod

        hvd = self.hvd
        return horovod.__version__, {
            "allreduce_library": f"Horovod {horovod.__version__} ({'MPI' if hvd.mpi_enabled() else 'Gloo'} controller)",
            "controller": "MPI" if hvd.mpi_enabled() else "Gloo",
            "mpi_threads_supported": hvd.mpi_threads_supported() if hvd.mpi_enabled() else None,
        }


class Native:
    name = "native"

    def __init__(self, gpu):
        import torch.distributed as dist

        self.dist = dist
        self.rank, self.size, self.local_rank = rendezvous.launcher_ranks()
        self.backend = "nccl" if gpu else "gloo"
        if self.size > 1 and not dist.is_initialized():  # once per process (the sweep makes two)
            first = rendezvous.first_host()
            address, port = rendezvous.coordinator(first)
            # gloo offers its host name's address (loopback in an emulated node): use this rank's own
            own = rendezvous.interface(rendezvous.own_address(first) if self.rank else address)
            if own and not gpu:
                os.environ.setdefault("GLOO_SOCKET_IFNAME", own)
            try:
                dist.init_process_group(
                    self.backend,
                    init_method=f"tcp://{address}:{port}",
                    rank=self.rank,
                    world_size=self.size,
                    timeout=datetime.timedelta(seconds=MEET_TIMEOUT_S),
                )
            except Exception as exc:  # TCPStore's error says little of where it tried
                raise ConnectionError(
                    f"rank {self.rank} of {self.size} could not join PyTorch's process group at rank 0's "
                    f"{address}:{port} ({self.backend}): {exc}"
                ) from None

    def broadcast(self, model):
        if self.size > 1:
            for t in model.state_dict().values():
                self.dist.broadcast(t, src=0)

    def wrap(self, model, optimizer, overlap):
        if overlap and self.size > 1:
            from torch.nn.parallel import DistributedDataParallel

            model = DistributedDataParallel(model, broadcast_buffers=False, bucket_cap_mb=DDP_BUCKET_BYTES / 2**20)
        return model, optimizer

    def wait(self, optimizer):
        """DistributedDataParallel waits for its buckets' allreduces at the end of backward."""

    def stepping(self, optimizer, overlap):
        return contextlib.nullcontext()

    def reduce(self, grads):
        views = [dense(g) for g in grads]
        flat = torch.cat([v.reshape(-1) for v in views])
        self.dist.all_reduce(flat)
        flat.div_(self.size)
        start = 0
        for v in views:
            v.copy_(flat[start : start + v.numel()].view_as(v))
            start += v.numel()

    def describe(self, overlap, grad_bytes):
        return "not used (torch.distributed)", {
            "allreduce_library": f"{NATIVE}: {self.backend}" if self.size > 1 else "none (one rank)",
            "reduction": "DistributedDataParallel buckets" if overlap else "one flat all_reduce after backward",
            "fusion_threshold_bytes": DDP_BUCKET_BYTES if overlap else grad_bytes,
            "cycle_time_s": NO_CYCLE_S,
        }

    def start_timeline(self, path):
        """No Horovod: the process group's collectives are in PyTorch's own profiler's trace."""

    def stop_timeline(self):
        pass

    def shutdown(self):
        from mpi4py import MPI

        if self.size > 1:
            self.dist.destroy_process_group()
        MPI.Finalize()  # MPI only named the ranks; mpirun counts a rank that does not finalize as failed


LIBRARIES = {"horovod": Horovod, "native": Native}
