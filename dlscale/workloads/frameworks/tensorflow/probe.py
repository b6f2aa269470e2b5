"""TensorFlow's matrix-multiply probe (dlscale/runtime/peak.py times what `matmul` returns)."""

import tensorflow as tf


def matmul(n, threads, device, half):
    """A function that multiplies an n x n matrix by itself and waits for the result."""
    tf.config.threading.set_intra_op_parallelism_threads(threads)
    tf.config.threading.set_inter_op_parallelism_threads(threads)
    with tf.device("/GPU:0" if device == "gpu" else "/CPU:0"):
        a = tf.random.normal((n, n), dtype=tf.float16 if half else tf.float32)
        product = tf.function(lambda x: tf.reduce_sum(tf.matmul(x, x)))

    def run():
        product(a).numpy()

    return run
