"""MXNet's Horovod binding as the communication instrument (torch/instrument.py says what one does)."""

import horovod.mxnet as hvd
import mxnet as mx


def start(comm, threads=None):
    """Horovod on the MPI communicator `comm`; the binding (MXNet's threads come from the launcher)."""
    hvd.init(comm=comm)
    return hvd


def ones(count):
    return mx.nd.ones((count,), dtype="float32")


def submit(tensors, names):
    """Horovod's averaging allreduce of each of `tensors` in place, queued as DistributedTrainer queues them."""
    for tensor, name in zip(tensors, names):
        hvd.allreduce_(tensor, op=hvd.Average, name=name)
    return tensors


def wait(handle):
    for tensor in handle:
        tensor.wait_to_read()
    return handle


def first(tensor):
    return float(tensor[0].asscalar())
