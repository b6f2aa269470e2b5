"""JAX's own allreduce for the allreduce sweep (harness/allreduce.py): the path JAX's gradients take.

Each size is one float32 buffer per rank, averaged over the ranks by `lax.pmean` inside a jitted
`shard_map`, as the trainer's step averages its gradients (XLA's collectives: gloo on the CPU). Each
size is compiled once, before it is timed.
"""

import jax
import numpy as np
from jax import lax
from jax.experimental.shard_map import shard_map
from jax.sharding import PartitionSpec as P

from workloads.frameworks.jax import SWEEP_PATH, collectives

PATH = SWEEP_PATH


def allreduce(comm):
    """For a size, a callable that runs one averaging allreduce and returns element 0 (1.0)."""
    rank, size = comm.Get_rank(), comm.Get_size()
    mesh = collectives.initialize(rank, size, collectives.first_host())
    spec = P(collectives.AXIS)
    mean = jax.jit(shard_map(lambda a: lax.pmean(a, collectives.AXIS), mesh=mesh, in_specs=spec, out_specs=spec))

    def prepare(nbytes):
        buffer = collectives.global_array(mesh, np.ones((1, nbytes // 4), np.float32), spec)
        mean(buffer).block_until_ready()  # compiled here, not in the timed runs

        def run():
            out = mean(buffer)
            out.block_until_ready()
            return float(out.addressable_data(0)[0, 0])

        return run

    return prepare, collectives.describe(size)
