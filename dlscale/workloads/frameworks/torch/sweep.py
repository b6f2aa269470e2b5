"""PyTorch's own allreduce for the allreduce sweep: `tensors` float32 buffers averaged by the sequential
native step's code (`Native.reduce`); few tensors per message against many gives the per-tensor cost."""

import torch

from dlscale.workloads.frameworks.torch import NAME, NATIVE, comm

PATH = NAME  # frameworks.sweep_path


def allreduce(mpi, tensors):
    """For a size, a callable that runs one averaging allreduce and returns element 0 (1.0)."""
    net = comm.Native(gpu=False)

    def prepare(nbytes):
        count = nbytes // 4
        pieces = min(tensors, count)
        lengths = [count // pieces] * (pieces - 1) + [count - count // pieces * (pieces - 1)]
        bufs = [torch.ones(n) for n in lengths]

        def run():
            net.reduce(bufs)
            value = float(bufs[0][0])
            for b in bufs:  # the mean of ones is one: start the next repetition from ones again
                b.fill_(1.0)
            return value

        return run

    return prepare, f"{NATIVE}: {net.backend}, {tensors} tensors per message"
