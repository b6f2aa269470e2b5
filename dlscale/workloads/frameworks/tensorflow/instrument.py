"""TensorFlow's Horovod binding as the communication instrument (torch/instrument.py says what one does).

Tensors handed over together are allreduced by one traced function per set of names, run in a thread, as
a traced step holds its allreduces (eager ones collide in Horovod; a thread per tensor cost 40x PyTorch's)."""

from concurrent.futures import ThreadPoolExecutor

import horovod.tensorflow as hvd
import tensorflow as tf

# More threads than any network has gradients in flight at once (ResNet-50 has 161 tensors).
_POOL = ThreadPoolExecutor(max_workers=256)
_TRACED = {}  # {tensor names: their allreduces as a traced function}, traced once, run every iteration


def start(comm, threads=None):
    """Horovod on the MPI communicator `comm`, TensorFlow at `threads` intra- and inter-op threads; the binding."""
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
