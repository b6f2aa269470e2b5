"""JAX's matrix-multiply probe (dlscale/runtime/peak.py times what `matmul` returns)."""

import os

import jax
import jax.numpy as jnp

from dlscale.workloads.frameworks.jax import xla_flags


def matmul(n, threads, device, half):
    """A function that multiplies an n x n matrix by itself and waits for the result. XLA's CPU
    threads are set as the trainer sets them (before JAX starts its backend)."""
    os.environ["XLA_FLAGS"] = xla_flags(threads)
    backend = "gpu" if device == "gpu" else "cpu"
    a = jax.device_put(jnp.ones((n, n), jnp.float16 if half else jnp.float32), jax.devices(backend)[0])
    product = jax.jit(lambda x: (x @ x).sum())

    def run():
        product(a).block_until_ready()

    return run
