"""Where a job's ranks meet for the libraries that do not take them from MPI (PyTorch, TensorFlow, JAX): MPI
carries rank 0's address (HOSTS_ENV's first host, or its own name under srun) with a port, or every rank's."""

import atexit
import os
import socket
import sys

from dlscale.core.vocabulary import HOSTS_ENV


def launcher_ranks():
    """(rank, size, local rank) as the launcher set them; one process started by hand is 0 of 1."""
    from mpi4py import MPI

    comm = MPI.COMM_WORLD
    local = comm.Split_type(MPI.COMM_TYPE_SHARED).Get_rank()
    return comm.Get_rank(), comm.Get_size(), local


def agree(met, bounded):
    """(every rank's `met`, any rank's `bounded`): one allreduce over MPI's world."""
    import numpy as np
    from mpi4py import MPI

    flags = np.array([0 if met else 1, 1 if bounded else 0], dtype=np.int32)
    MPI.COMM_WORLD.Allreduce(MPI.IN_PLACE, flags, op=MPI.MAX)
    return flags[0] == 0, flags[1] == 1


def first_host():
    """The job's first host, where rank 0 runs (None under srun: rank 0 gives its own host name)."""
    hosts = os.environ.get(HOSTS_ENV, "")
    return hosts.split(",")[0] if hosts else None


def _rank0_address(first):
    return {None: socket.gethostname(), "localhost": "127.0.0.1"}.get(first, first)


def own_address(first):
    """This rank's address as its peers reach it: the local end of its route to rank 0's host."""
    if first in (None, "localhost"):
        return _rank0_address(first)
    try:
        with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
            s.connect((socket.gethostbyname(first), 9))  # no packet is sent: only a route is chosen
            return s.getsockname()[0]
    except OSError as exc:
        raise ConnectionError(f"no route from this rank to the job's first host {first!r}: {exc}") from None


def interface(address):
    """The name of the network interface that holds IPv4 `address` (Linux), or None."""
    import fcntl
    import struct

    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
        for _, name in socket.if_nameindex():
            try:
                packed = fcntl.ioctl(s.fileno(), 0x8915, struct.pack("256s", name.encode()[:15]))  # SIOCGIFADDR
            except OSError:
                continue  # no IPv4 address on it
            if socket.inet_ntoa(packed[20:24]) == address:
                return name
    return None


def _free_port(address):
    with socket.socket() as s:  # a port free now (the library binds it again at once)
        s.bind((address, 0))
        return s.getsockname()[1]


def coordinator(first=None):
    """(address, port) where rank 0 listens, chosen by rank 0 and sent to every rank over MPI."""
    from mpi4py import MPI

    comm = MPI.COMM_WORLD
    found = None
    if comm.Get_rank() == 0:
        address = _rank0_address(first)
        try:
            found = (address, _free_port(address))
        except OSError as exc:  # the others wait in bcast (and MPI's finalize for them): end the job
            hosts = f"{HOSTS_ENV}={os.environ.get(HOSTS_ENV)}"
            why = f"rank 0 cannot listen on {address}, the job's first host ({hosts}), where its peers will look for it"
            print(f"{why}: {exc}", file=sys.stderr, flush=True)
            comm.Abort(1)
    return comm.bcast(found, root=0)


def peers(first=None):
    """["address:port"] of every rank, in rank order: each rank's own address and a free port on it."""
    from mpi4py import MPI

    comm = MPI.COMM_WORLD
    address = _rank0_address(first) if comm.Get_rank() == 0 else own_address(first)
    # free on every address: a worker's server (TensorFlow's gRPC) listens on all of them
    return [f"{a}:{p}" for a, p in comm.allgather((address, _free_port("0.0.0.0")))]


def end():
    """End this rank: the exit handlers run (Horovod's, MPI_Finalize), the interpreter's teardown does not
    (in it a gloo thread holding a tensor took the GIL and the rank aborted)."""
    from mpi4py import MPI

    sys.stdout.flush()
    sys.stderr.flush()
    atexit._run_exitfuncs()  # CPython's own; there is no public way to run them and skip the teardown
    if MPI.Is_initialized() and not MPI.Is_finalized():  # mpi4py finalizes in the teardown
        MPI.Finalize()
    os._exit(0)
