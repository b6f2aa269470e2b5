"""JAX's own multi-process collectives, set up from the launcher's ranks (Horovod has no JAX binding).

Every rank of a run is an MPI rank (mpirun, or srun with PMIx), so MPI says who is who: rank 0
takes a free port on its own address and sends (address, port) to the others over MPI, and every
rank then calls `jax.distributed.initialize` with it (nothing for the user to type). Rank 0's
address is the first host of the job (the hostfile's name for it, which is what its peers can
reach, also inside an emulated cluster's namespaces), or its own host name where the launcher
places ranks itself (srun). The collectives themselves are XLA's: gloo over TCP on the CPU, NCCL on
GPUs. One rank initializes nothing.
"""

import os
import socket

import jax
import numpy as np
from jax.experimental import multihost_utils
from jax.sharding import Mesh, NamedSharding
from jax.sharding import PartitionSpec as P
from mpi4py import MPI

AXIS = "ranks"
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
        address = first_host if first_host and first_host != "localhost" else socket.gethostname()
        if first_host == "localhost":
            address = "127.0.0.1"
        with socket.socket() as s:  # a port free now on rank 0's address (bound again at once)
            s.bind((address, 0))
            found = (address, s.getsockname()[1])
    return comm.bcast(found, root=0)


def initialize(rank, size, first_host):
    """Join this rank to the job's JAX processes (size > 1); a mesh of one device per rank."""
    if size > 1:
        jax.config.update("jax_cpu_collectives_implementation", CPU_COLLECTIVES)
        address, port = _coordinator(first_host)
        jax.distributed.initialize(f"{address}:{port}", num_processes=size, process_id=rank)
    return Mesh(np.array(jax.devices()[: max(size, 1)]).reshape(-1), (AXIS,))


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


def replicated(mesh):
    return NamedSharding(mesh, P())


def environ_first_host(spec):
    """The job's first host from the run's spec (launch facts), or None where it has none."""
    hosts = spec.get("launch", {}).get("hosts") or []
    launcher = spec.get("launch", {}).get("argv", ["mpirun"])[:1]
    if launcher and os.path.basename(launcher[0]) == "srun":
        return None
    return hosts[0] if hosts else None
