"""JAX's own multi-process collectives, set up from the launcher's ranks (Horovod has no JAX binding).

Every rank of a run is an MPI rank (mpirun, or srun with PMIx), so MPI says who is who: rank 0
takes a free port on its own address and sends (address, port) to the others over MPI, and every
rank then calls `jax.distributed.initialize` with it (nothing for the user to type). Rank 0's
address is the first host of the job (HOSTS_ENV, set by the harness's launcher from the hostfile:
the name its peers can reach, also inside an emulated cluster's namespaces), or its own host name
where Slurm placed the ranks (srun). The collectives themselves are XLA's: gloo over TCP on the CPU, NCCL on
GPUs. One rank initializes nothing.
"""

import os
import socket

import jax
import numpy as np
from jax.experimental import multihost_utils
from jax.sharding import Mesh
from mpi4py import MPI

from harness.vocabulary import HOSTS_ENV

AXIS = "ranks"
_joined = False  # this process has joined jax.distributed (it can only once)
CPU_COLLECTIVES = "gloo"


def launcher_ranks():
    """(rank, size, local rank) as the launcher set them (Open MPI, or Slurm's srun); one process
    started by hand is rank 0 of 1."""
    comm = MPI.COMM_WORLD
    local = comm.Split_type(MPI.COMM_TYPE_SHARED).Get_rank()
    return comm.Get_rank(), comm.Get_size(), local


def _coordinator(first_host):
    """(address, port) of rank 0's coordination service, chosen by rank 0 and shared over MPI."""
    comm = MPI.COMM_WORLD
    found = None
    if comm.Get_rank() == 0:
        address = {None: socket.gethostname(), "localhost": "127.0.0.1"}.get(first_host, first_host)
        with socket.socket() as s:  # a port free now on rank 0's address (bound again at once)
            s.bind((address, 0))
            found = (address, s.getsockname()[1])
    return comm.bcast(found, root=0)


def initialize(rank, size, first_host):
    """Join this rank to the job's JAX processes (size > 1, once per process); a mesh of one device
    per rank."""
    global _joined
    if size > 1 and not _joined:
        jax.config.update("jax_cpu_collectives_implementation", CPU_COLLECTIVES)
        address, port = _coordinator(first_host)
        jax.distributed.initialize(f"{address}:{port}", num_processes=size, process_id=rank)
        _joined = True
    return Mesh(np.array(jax.devices()[: max(size, 1)]).reshape(-1), (AXIS,))


def from_rank0(make, key, rank, size):
    """`make(key)`'s arrays made on rank 0 and sent to every rank (the initial weights, as Horovod's
    broadcast from rank 0 does). Jitted: Flax's initializers run op by op otherwise (24 s for
    GoogLeNet on one thread), and compiled they are loaded from the compilation cache by later runs;
    only rank 0 runs it (JAX writes and shares that cache from process 0 alone), the others know
    the arrays' shapes and take rank 0's values."""
    if size == 1:
        return jax.jit(make)(key)
    if rank == 0:
        made = jax.jit(make)(key)
    else:
        made = jax.tree.map(lambda s: np.zeros(s.shape, s.dtype), jax.eval_shape(make, key))
    return jax.device_put(jax.tree.map(np.asarray, multihost_utils.broadcast_one_to_all(made)), jax.local_devices()[0])


def describe(size):
    """The communication library a run used, recorded with its results."""
    if size == 1:
        return "none (one rank)"
    backend = jax.default_backend()
    return f"jax.distributed + XLA collectives ({'NCCL' if backend == 'gpu' else CPU_COLLECTIVES})"


def global_array(mesh, local, spec):
    """This rank's numpy (or jax) data as its part of a global array over `mesh` (spec: P(AXIS) for
    a rank's batch, P() for what every rank holds alike)."""
    return multihost_utils.host_local_array_to_global_array(local, mesh, spec)


def local_part(mesh, array, spec):
    """This rank's part of a global array, as a single-device array."""
    return multihost_utils.global_array_to_host_local_array(array, mesh, spec)


def first_host():
    """The job's first host, where rank 0 runs, as the launcher named it (None under srun, where
    Slurm placed the ranks: rank 0 then gives its own host name)."""
    hosts = os.environ.get(HOSTS_ENV, "")
    return hosts.split(",")[0] if hosts else None
