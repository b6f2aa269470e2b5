"""JAX's own multi-process collectives (XLA's: gloo on the CPU, NCCL on GPUs), set up from the
launcher's ranks and rank 0's address (dlscale/workloads/rendezvous.py). One rank initializes nothing."""

import functools
import os
import time

import jax
import numpy as np
from jax._src import distributed  # JAX's process state: no public way to change the cache write's gate
from jax.experimental import multihost_utils
from jax.sharding import Mesh

from dlscale.workloads import rendezvous
from dlscale.workloads.frameworks.jax import SLOW_RANK_ENV

AXIS = "ranks"
# XLA's gloo gives a peer 30 s to join a collective's first use, which a rank still compiling misses: every
# rank waits at a barrier before a program's first collective, bounded by `run_timeout_s` (this is a backstop).
BARRIER_TIMEOUT_S = 24 * 3600
_joined = False  # this process has joined jax.distributed (it can only once)
CPU_COLLECTIVES = "gloo"


def initialize(rank, size, first_host):
    """Join this rank to the job's JAX processes (size > 1, once per process); a mesh of a device per rank."""
    global _joined
    if size > 1 and not _joined:
        jax.config.update("jax_cpu_collectives_implementation", CPU_COLLECTIVES)
        address, port = rendezvous.coordinator(first_host)
        _gloo_on(rendezvous.own_address(first_host) if rank else address)
        jax.distributed.initialize(f"{address}:{port}", num_processes=size, process_id=rank)
        _joined = True
    mesh = Mesh(np.array(jax.devices()[: max(size, 1)]).reshape(-1), (AXIS,))
    if size > 1 and jax.default_backend() == "cpu":
        _every_rank_writes_its_cache_entries()
    return mesh


def _every_rank_writes_its_cache_entries():
    """Let this process write JAX's compilation cache, which only process 0 writes: on the CPU each one's
    key covers its own devices (no two write one entry), so every rank but 0 compiled in every run. Once started,
    JAX 0.10.2 reads the process id only at that write's gate (and GPU-only settings), so it is set to 0."""
    distributed.global_state.process_id = 0


def _gloo_on(address):
    """XLA's gloo offers the address its host name resolves to (loopback in an emulated node), and JAX
    gives no way to say otherwise: its maker gets this rank's own address and interface instead."""
    from jax._src.lib import xla_client

    make = xla_client._xla.make_gloo_tcp_collectives
    interface = rendezvous.interface(address)
    if interface and not getattr(make, "dlscale", False):
        bound = functools.partial(make, hostname=address, interface=interface)
        bound.dlscale = True
        xla_client._xla.make_gloo_tcp_collectives = bound


def barrier(name, rank, size):
    """Wait until every rank reaches `name` (JAX's coordination service, not a gloo collective)."""
    if size == 1:
        return
    slow, _, seconds = os.environ.get(SLOW_RANK_ENV, "").partition(":")
    seconds, _, only = seconds.partition(":")
    if slow and int(slow) == rank and only in ("", name):
        time.sleep(float(seconds))
    distributed.global_state.client.wait_at_barrier(f"dlscale:{name}", BARRIER_TIMEOUT_S * 1000)


def from_rank0(make, key, rank, size):
    """`make(key)`'s arrays made on rank 0 and sent to every rank (the initial weights). Jitted: Flax's
    initializers run op by op otherwise (24 s for GoogLeNet on one thread), and later runs load them."""
    if size == 1:
        return jax.jit(make)(key)
    if rank == 0:
        made = jax.jit(make)(key)
    else:
        made = jax.tree.map(lambda s: np.zeros(s.shape, s.dtype), jax.eval_shape(make, key))
    barrier("initial weights", rank, size)  # rank 0 may compile them for long (a cold cache)
    return jax.device_put(jax.tree.map(np.asarray, multihost_utils.broadcast_one_to_all(made)), jax.local_devices()[0])


def describe(size):
    """The communication library a run used, recorded with its results."""
    if size == 1:
        return "none (one rank)"
    return f"jax.distributed + XLA collectives ({'NCCL' if jax.default_backend() == 'gpu' else CPU_COLLECTIVES})"


def global_array(mesh, local, spec):
    """This rank's data as its part of a global array over `mesh` (P(AXIS): a rank's own; P(): alike)."""
    return multihost_utils.host_local_array_to_global_array(local, mesh, spec)


def local_part(mesh, array, spec):
    """This rank's part of a global array, as a single-device array."""
    return multihost_utils.global_array_to_host_local_array(array, mesh, spec)
