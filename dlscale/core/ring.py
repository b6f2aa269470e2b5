"""Ring allreduce as the sweep measures it and the model uses it: message shapes, nccl-tests' bandwidths
(busbw = algbw x 2(n-1)/n) and the alpha-beta model on n ranks, T(m) = 2(n-1) alpha + 2(n-1)/n m beta."""

import numpy as np

SCHEMA = "dlscale.allreduce/1"  # the sweep's records
FUSED_PIECES = 4  # tensors per message on the horovod path, fused by Horovod into one buffer
# Tensors per message on the horovod_tensors path (GoogLeNet hands Horovod 173, ResNet-50 161), and
# its largest message: beyond it the per-byte cost, the same on both paths, swamps the per-tensor one.
MANY_PIECES = 128
PER_TENSOR_MAX_BYTES = 1 << 20
TENSORS_SUFFIX = "_tensors"  # a library's many-tensor path (horovod_tensors, jax_tensors)
# The one-tensor path (horovod_one), from ONE_MIN_BYTES up: a tensor filling a response is reduced in its own
# memory, without the fusion buffer's two copies, at large sizes as costly as the reduction (AlexNet's 151 MB).
ONE_SUFFIX = "_one"
ONE_MIN_BYTES = 1 << 20


def bus_bandwidth(algbw, ranks):
    return algbw * 2 * (ranks - 1) / ranks


def ring_time(nbytes, ranks, alpha_s, beta_s_per_byte):
    return 2 * (ranks - 1) * alpha_s + 2 * (ranks - 1) / ranks * nbytes * beta_s_per_byte


def fit_ring(nbytes, times, ranks):
    """Weighted least-squares alpha (s) and beta (s/byte) of the ring model, and the median |rel. error|.
    Weights 1/t (residuals over sqrt(t)): a fit of relative errors let the many small sizes (Horovod's
    cycle) set beta (22% below a 500 Mbit/s link's), one of absolute errors lets the largest set alpha."""
    if ranks < 2:
        raise ValueError("the ring model needs at least 2 ranks")
    m, t = np.asarray(nbytes, float), np.asarray(times, float)
    weight = 1 / np.sqrt(t)
    design = np.column_stack([np.full_like(m, 2 * (ranks - 1)), 2 * (ranks - 1) / ranks * m]) * weight[:, None]
    (alpha, beta), *_ = np.linalg.lstsq(design, t * weight, rcond=None)
    pred = ring_time(m, ranks, alpha, beta)
    return float(alpha), float(beta), float(np.median(np.abs(pred - t) / t))
