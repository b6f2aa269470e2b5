"""JAX's matrix-multiply probe (dlscale/runtime/peak.py times what `matmul` returns)."""

import jax
import jax.numpy as jnp

from dlscale.workloads.frameworks.jax import hold_threads


def matmul(n, threads, device, half):
    """A function that multiplies an n x n matrix by itself and waits for the result (threads as the trainer's)."""
    hold_threads(threads)
    backend = "gpu" if device == "gpu" else "cpu"
    a = jax.device_put(jnp.ones((n, n), jnp.float16 if half else jnp.float32), jax.devices(backend)[0])
    product = jax.jit(lambda x: (x @ x).sum())
    return lambda: product(a).block_until_ready()
