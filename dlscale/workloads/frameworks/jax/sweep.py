"""JAX's own allreduce for the allreduce sweep: `tensors` float32 buffers averaged by one `lax.pmean` in a
jitted `shard_map`, as the trainer's step does; few tensors against many gives the per-tensor cost."""

import jax
import numpy as np
from jax import lax
from jax.experimental.shard_map import shard_map
from jax.sharding import PartitionSpec as P

from dlscale.workloads import rendezvous
from dlscale.workloads.frameworks.jax import NAME, collectives

PATH = NAME  # frameworks.sweep_path


def allreduce(comm, tensors):
    """For a size, a callable that runs one averaging allreduce and returns element 0 (1.0)."""
    rank, size = comm.Get_rank(), comm.Get_size()
    mesh = collectives.initialize(rank, size, rendezvous.first_host())
    spec = P(collectives.AXIS)
    mean = jax.jit(shard_map(lambda bufs: lax.pmean(bufs, collectives.AXIS), mesh=mesh, in_specs=spec, out_specs=spec))

    def prepare(nbytes):
        count = nbytes // 4
        pieces = min(tensors, count)
        lengths = [count // pieces] * (pieces - 1) + [count - count // pieces * (pieces - 1)]
        bufs = collectives.global_array(mesh, [np.ones((1, n), np.float32) for n in lengths], spec)
        jax.block_until_ready(mean(bufs))  # compiled here, not in the timed runs

        def run():
            out = jax.block_until_ready(mean(bufs))
            return float(out[0].addressable_data(0)[0, 0])

        return run

    return prepare, f"{collectives.describe(size)}, {tensors} tensors per message"
