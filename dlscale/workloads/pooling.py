"""PyTorch's pooling rules as plain arithmetic, for the networks that match PyTorch's layer for layer."""

import math


def pool_out(size, k, s, p, ceil):
    """Output length of PyTorch's pooling (the last window must start inside the padded input)."""
    if not ceil:
        return (size + 2 * p - k) // s + 1
    out = math.ceil((size + 2 * p - k) / s) + 1
    if (out - 1) * s >= size + p:
        out -= 1
    return out


def pool_pads(size, k, s, p, ceil):
    """(before, after) padding of one axis for a valid pool that gives PyTorch's output length."""
    extra = (pool_out(size, k, s, p, ceil) - 1) * s + k - size - 2 * p
    return p, p + max(extra, 0)


def adaptive_bins(size, n):
    """PyTorch's AdaptiveAvgPool bins of one axis: bin i spans [floor(i*size/n), ceil((i+1)*size/n))."""
    return [((i * size) // n, -((-(i + 1) * size) // n)) for i in range(n)]
