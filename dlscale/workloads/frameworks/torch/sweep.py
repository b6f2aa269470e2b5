"""PyTorch's own allreduce for the allreduce sweep (dlscale/runtime/allreduce.py): the path a native run's
gradients take (comm.py's Native: the process group, gloo on the CPU).

A message of `tensors` float32 buffers per rank is averaged the way the sequential native step
averages its gradients, by the very same code (`Native.reduce`: the buffers copied into one flat
tensor, one all_reduce, the mean, copied back), which is also what DistributedDataParallel does
per bucket. The sweep runs it with few tensors per message and with many, and the difference per
tensor is the per-tensor cost, as for Horovod.
"""

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
