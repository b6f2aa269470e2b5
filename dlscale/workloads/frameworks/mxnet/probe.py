"""MXNet's matrix-multiply probe (dlscale/runtime/peak.py times what `matmul` returns)."""

import mxnet as mx


def matmul(n, threads, device, half):
    """A function that multiplies an n x n matrix by itself and waits for the result (threads: the environment's)."""
    ctx = mx.gpu(0) if device == "gpu" else mx.cpu()
    a = mx.nd.random.normal(shape=(n, n), ctx=ctx, dtype="float16" if half else "float32")
    return lambda: mx.nd.dot(a, a).sum().asscalar()
