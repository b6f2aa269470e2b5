"""TensorFlow's own allreduce for the allreduce sweep: `tensors` float32 buffers averaged by the sequential
step's code (`Native.allreduce`, one pack); one strategy per process, made before any TensorFlow operation."""

import functools

import tensorflow as tf

from dlscale.workloads.frameworks.tensorflow import NAME, NATIVE, comm

PATH = NAME  # frameworks.sweep_path


@functools.cache
def _library():
    tf.config.threading.set_intra_op_parallelism_threads(1)  # the sweep times the network, not compute
    tf.config.threading.set_inter_op_parallelism_threads(1)
    net = comm.Native()
    net.start()
    return net


def allreduce(mpi, tensors):
    """For a size, a callable that runs one averaging allreduce and returns element 0 (1.0)."""
    net = _library()

    def prepare(nbytes):
        count = nbytes // 4
        pieces = min(tensors, count)
        lengths = [count // pieces] * (pieces - 1) + [count - count // pieces * (pieces - 1)]
        bufs = [tf.ones([n]) for n in lengths]
        mean = tf.function(lambda *b: net.allreduce(b, overlap=False)[0][0])
        mean(*bufs)  # traced here, not in the timed runs
        return lambda: float(mean(*bufs).numpy())

    return prepare, f"{NATIVE}, {tensors} tensors per message"
