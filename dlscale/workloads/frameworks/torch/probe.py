"""PyTorch's matrix-multiply probe (dlscale/runtime/peak.py times what `matmul` returns)."""

import torch


def matmul(n, threads, device, half):
    """A function that multiplies an n x n matrix by itself and waits for the result."""
    torch.set_num_threads(threads)
    dev = torch.device("cuda" if device == "gpu" else "cpu")
    a = torch.randn(n, n, device=dev, dtype=torch.float16 if half else torch.float32)
    return lambda: (a @ a).sum().item()
