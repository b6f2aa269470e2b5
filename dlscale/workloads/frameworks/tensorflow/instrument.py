"""TensorFlow's Horovod binding as the communication instrument of a study that runs TensorFlow
through Horovod and neither PyTorch nor MXNet (dlscale/workloads/frameworks/torch/instrument.py says
what an instrument does).

The tensors handed over together are allreduced by one traced function (traced once per set of
names), run in a thread of its own, as a traced training step holds its gradients' allreduce ops,
each named by its tensor, and TensorFlow runs them side by side, letting go of the GIL. (Eager
allreduces would not do: the kernel TensorFlow caches for one keeps the name of its first call, so
two in flight at once collide in Horovod under one name; and one thread and call per tensor costs
~0.35 ms a tensor, 40x PyTorch's hand-over, seen in bench/instruments.py's first trial.)"""

from concurrent.futures import ThreadPoolExecutor

import horovod.tensorflow as hvd
import tensorflow as tf

# More threads than any network has gradients in flight at once (ResNet-50 has 161 tensors).
_POOL = ThreadPoolExecutor(max_workers=256)
_TRACED = {}  # {tensor names: their allreduces as a traced function}, traced once, run every iteration


def start(comm, threads=None):
    """Horovod on the MPI communicator `comm`, TensorFlow at `threads` intra-op and inter-op threads
    as its trainer keeps it (the inter-op pool runs a message's allreduce ops side by side); the binding."""
    if threads:
        tf.config.threading.set_intra_op_parallelism_threads(threads)
        tf.config.threading.set_inter_op_parallelism_threads(threads)
    hvd.init(comm=comm)
    return hvd


def ones(count):
    return tf.ones([count], dtype=tf.float32)


def _allreduce(tensors, names):
    key = tuple(names)
    if key not in _TRACED:
        _TRACED[key] = tf.function(lambda ts: [hvd.allreduce(t, op=hvd.Average, name=n) for t, n in zip(ts, key)])
    return _TRACED[key](list(tensors))


def submit(tensors, names):
    """Horovod's averaging allreduce of each of `tensors`, started in a thread; returns at once."""
    return _POOL.submit(_allreduce, tensors, names)


def wait(handle):
    return handle.result()


def first(tensor):
    return float(tensor[0])
