"""TensorFlow's Horovod binding as the communication instrument of a study that runs TensorFlow
through Horovod and neither PyTorch nor MXNet (dlscale/workloads/frameworks/torch/instrument.py says
what an instrument does).

Each allreduce is a traced function of its own, run in a thread of its own: a traced step runs its
gradients' allreduce ops as their gradients are ready, each op named by its tensor, and lets go of
the GIL while they run. (An eager allreduce would not do: the kernel TensorFlow caches for it keeps
the name of its first call, so two in flight at once collide in Horovod under one name.)"""

from concurrent.futures import ThreadPoolExecutor

import horovod.tensorflow as hvd
import tensorflow as tf

# More threads than any network has gradients in flight at once (ResNet-50 has 161 tensors).
_POOL = ThreadPoolExecutor(max_workers=256)
_TRACED = {}  # {tensor name: its allreduce as a traced function}, traced once, run every iteration


def start(comm, threads=None):
    """Horovod on the MPI communicator `comm` (and `threads` intra-op threads); the binding."""
    if threads:
        tf.config.threading.set_intra_op_parallelism_threads(threads)
    hvd.init(comm=comm)
    return hvd


def ones(count):
    return tf.ones([count], dtype=tf.float32)


def _allreduce(tensor, name):
    if name not in _TRACED:
        _TRACED[name] = tf.function(lambda t: hvd.allreduce(t, op=hvd.Average, name=name))
    return _TRACED[name](tensor)


def submit(tensor, name):
    """Horovod's averaging allreduce of `tensor`, started in a thread; returns at once."""
    return _POOL.submit(_allreduce, tensor, name)


def wait(handle):
    return handle.result()


def first(tensor):
    return float(tensor[0])
