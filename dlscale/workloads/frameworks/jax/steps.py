"""The JAX trainer's jitted functions: the whole step (native timing) and its four phases (phased).

The state's two forms (`to_native` / `to_local`): native, global arrays over the mesh, weights and
optimizer state replicated (P()), the batch and batch-norm statistics each rank's own (P(AXIS));
phased, each rank's single-device arrays, which the gradients' mean takes as parts of global arrays.
"""

import collections
import functools
import time

import jax
import jax.numpy as jnp
import optax
from jax import lax
from jax.experimental.shard_map import shard_map
from jax.flatten_util import ravel_pytree
from jax.sharding import NamedSharding
from jax.sharding import PartitionSpec as P

from dlscale.workloads.frameworks.jax import collectives
from dlscale.workloads.frameworks.jax.collectives import AXIS, global_array, local_part
from dlscale.workloads.frameworks.jax.profile import COMM_SCOPE, UPDATE_SCOPE

# Every event JAX's monitoring records in this process, counted (`compile_once` tells hit from miss).
_EVENTS = collections.Counter()
jax.monitoring.register_event_listener(lambda event, **_: _EVENTS.update([event]))
CACHE_HIT = "/jax/compilation_cache/cache_hits"


def compile_once(lowered, what, record):
    """`lowered` compiled; its seconds and whether JAX's persistent cache served it in record[what]."""
    hits, start = _EVENTS[CACHE_HIT], time.perf_counter()
    compiled = lowered.compile()
    record[what] = {"s": round(time.perf_counter() - start, 3), "cache": "hit" if _EVENTS[CACHE_HIT] > hits else "miss"}
    return compiled


def _stack(tree):
    return jax.tree.map(lambda a: a[None], tree)


def _unstack(tree):
    return jax.tree.map(lambda a: a[0], tree)


class Steps:
    def __init__(self, model, optimizer, mesh, size, overlap, rank=0):
        self.model, self.optimizer, self.mesh, self.size, self.overlap = model, optimizer, mesh, size, overlap
        self.rank = rank
        self.forward = jax.jit(self._forward, static_argnums=5)
        self.backward = jax.jit(lambda vjp: _stack(vjp(jnp.ones((), jnp.float32))[0]))
        self.update = jax.jit(self._update)
        spec = P(AXIS)
        mean = shard_map(self._mean_over_ranks, mesh=mesh, in_specs=spec, out_specs=spec, check_rep=False)
        self._mean = jax.jit(mean)
        replicated = P()
        self._compiled = self._mean_compiled = None
        self.compile_record = {}  # what compile_once compiled: seconds, cache hit or miss
        self.step = jax.jit(
            shard_map(
                self._step,
                mesh=mesh,
                in_specs=(replicated, spec, replicated, replicated, spec, spec),
                out_specs=(replicated, spec, replicated, replicated, spec),
                check_rep=False,
            ),
            donate_argnums=(0, 1, 2, 3),
        )

    def _loss(self, params, stats, x, y, key):
        variables = {"params": params, "batch_stats": stats}
        logits, mutated = self.model.apply(variables, x, train=True, rngs={"dropout": key}, mutable=["batch_stats"])
        loss = optax.softmax_cross_entropy_with_integer_labels(logits, y).mean()
        return loss, mutated.get("batch_stats", stats)

    def _mean_over_ranks(self, grads):
        """The gradients' mean: one collective of many operands, each free to start as its gradient exists
        (overlap), or of them all flattened after a barrier (sequential)."""
        with jax.named_scope(COMM_SCOPE):
            if self.overlap:
                return lax.pmean(grads, AXIS)
            flat, unravel = ravel_pytree(lax.optimization_barrier(grads))
            return unravel(lax.pmean(flat, AXIS))

    def _apply(self, grads, opt_state, params):
        with jax.named_scope(UPDATE_SCOPE):
            updates, opt_state = self.optimizer.update(grads, opt_state, params)
            return optax.apply_updates(params, updates), opt_state

    def _forward(self, params, stats, x, y, key, rank):
        key, drop = jax.random.split(key)
        drop = jax.random.fold_in(drop, rank)  # each rank its own dropout masks
        loss, vjp, new_stats = jax.vjp(lambda p: self._loss(p, stats, x, y, drop), params, has_aux=True)
        return loss, vjp, new_stats, key

    def mean(self, grads):
        """Phased comm: the rank's gradients (leading axis of one) as its parts of global arrays."""
        sharding = NamedSharding(self.mesh, P(AXIS))

        def assemble(g):
            return jax.make_array_from_single_device_arrays((self.size, *g.shape[1:]), sharding, [g])

        parts = jax.tree.map(assemble, grads)
        if self._mean_compiled is None:  # compiled on every rank before its first collective runs
            self._mean_compiled = compile_once(self._mean.lower(parts), "phased mean", self.compile_record)
            collectives.barrier("phased mean compiled", self.rank, self.size)
        averaged = self._mean_compiled(parts)
        return jax.tree.map(lambda a: a.addressable_data(0), averaged)

    def _update(self, params, opt_state, grads):
        return self._apply(_unstack(grads), opt_state, params)

    def _step(self, params, stats, opt_state, key, x, y):
        key, drop = jax.random.split(key)
        drop = jax.random.fold_in(drop, lax.axis_index(AXIS))  # each rank its own dropout masks
        (loss, stats), grads = jax.value_and_grad(self._loss, has_aux=True)(params, _unstack(stats), x, y, drop)
        if self.size > 1:
            grads = self._mean_over_ranks(grads)
        params, opt_state = self._apply(grads, opt_state, params)
        return params, _stack(stats), opt_state, key, loss[None]

    def native(self, *args):
        """The whole step, compiled once (kept: its text names the operations in traces)."""
        if self._compiled is None:  # compiled on every rank before its first collective runs
            self._compiled = compile_once(self.step.lower(*args), "native step", self.compile_record)
            collectives.barrier("native step compiled", self.rank, self.size)
        return self._compiled

    def to_native(self, params, stats, opt_state, key):
        replicated = functools.partial(global_array, self.mesh, spec=P())
        stats = global_array(self.mesh, _stack(stats), P(AXIS))
        return replicated(params), stats, replicated(opt_state), replicated(key)

    def to_local(self, params, stats, opt_state, key):
        replicated = functools.partial(local_part, self.mesh, spec=P())
        stats = _unstack(local_part(self.mesh, stats, P(AXIS)))
        return replicated(params), stats, replicated(opt_state), replicated(key)

    def batch(self, x, y):
        return global_array(self.mesh, (x, y), P(AXIS))

    @staticmethod
    def ordered(params):
        """The weights in PyTorch's definition order (layers by name; kernel before bias, scale before bias)."""
        order = {"kernel": 0, "scale": 0, "bias": 1}
        return [params[layer][k] for layer in sorted(params) for k in sorted(params[layer], key=order.get)]
