"""TensorFlow's matrix-multiply probe (dlscale/runtime/peak.py times what `matmul` returns)."""

import tensorflow as tf

from dlscale.workloads.devices import gpu_for_rank
from dlscale.workloads.frameworks.tensorflow import LABEL


def matmul(n, threads, device, half):
    """A function that multiplies an n x n matrix by itself and waits for the result; device gpu without a GPU
    fails (soft placement would time the CPU as the GPU)."""
    tf.config.threading.set_intra_op_parallelism_threads(threads)
    tf.config.threading.set_inter_op_parallelism_threads(threads)
    if device == "gpu":
        build = "a CUDA build" if tf.test.is_built_with_cuda() else "a CPU-only build"
        gpu_for_rank(LABEL, tf.__version__, len(tf.config.list_physical_devices("GPU")), 0, build)
    with tf.device("/GPU:0" if device == "gpu" else "/CPU:0"):
        a = tf.random.normal((n, n), dtype=tf.float16 if half else tf.float32)
        product = tf.function(lambda x: tf.reduce_sum(tf.matmul(x, x)))
    return lambda: product(a).numpy()
