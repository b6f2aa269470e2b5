"""A bare JAX training loop: the whole step in one jitted function, no phases, no waits but the last,
no records (the benchmark's baseline). Same model, data, optimizer, threads and communication as
dlscale.workloads.frameworks.jax.trainer in overlap mode (the ranks joined by jax.distributed, one mean
per gradient inside the step; none on one rank), written as JAX's own data-parallel examples write
it: a `shard_map`ped step over a mesh of one device per rank, the batches made into global arrays
before the loop.

Usage (under mpirun): python bench/bare_jax.py SPEC.json -> prints {"throughput_img_per_s": ...}
"""

import json
import sys
import time
from pathlib import Path

from dlscale.workloads.frameworks.jax import hold_threads  # noqa: E402 (imports no JAX)

spec = json.loads(Path(sys.argv[1]).read_text())
hold_threads(spec["threads_per_rank"])  # as the trainer holds them, before JAX starts

import jax  # noqa: E402
import numpy as np  # noqa: E402
import optax  # noqa: E402
from jax import lax  # noqa: E402
from jax.experimental import multihost_utils  # noqa: E402
from jax.experimental.shard_map import shard_map  # noqa: E402
from jax.sharding import PartitionSpec as P  # noqa: E402

from dlscale.workloads import rendezvous  # noqa: E402
from dlscale.workloads.batches import SyntheticData  # noqa: E402
from dlscale.workloads.frameworks.jax import collectives  # noqa: E402
from dlscale.workloads.registry import build_model  # noqa: E402

rank, size, _ = rendezvous.launcher_ranks()
mesh = collectives.initialize(rank, size, rendezvous.first_host())
model = build_model("jax", spec["model"], spec["classes"], spec["image_size"])
key = jax.random.PRNGKey(spec["seed"])
side = spec["image_size"]
variables = model.init(key, np.zeros((1, side, side, 3), np.float32), train=False)
optimizer = optax.sgd(spec["lr"], momentum=spec["momentum"])


def loss_fn(params, stats, x, y, drop):
    logits, new = model.apply(
        {"params": params, "batch_stats": stats}, x, train=True, rngs={"dropout": drop}, mutable=["batch_stats"]
    )
    return optax.softmax_cross_entropy_with_integer_labels(logits, y).mean(), new.get("batch_stats", stats)


def step(params, stats, opt_state, key, x, y):
    key, drop = jax.random.split(key)
    drop = jax.random.fold_in(drop, lax.axis_index("ranks"))
    stats = jax.tree.map(lambda a: a[0], stats)
    (loss, stats), grads = jax.value_and_grad(loss_fn, has_aux=True)(params, stats, x, y, drop)
    if size > 1:
        grads = jax.tree.map(lambda g: lax.pmean(g, "ranks"), grads)
    updates, opt_state = optimizer.update(grads, opt_state, params)
    return optax.apply_updates(params, updates), jax.tree.map(lambda a: a[None], stats), opt_state, key, loss[None]


ranks, same = P("ranks"), P()
step = jax.jit(
    shard_map(
        step,
        mesh=mesh,
        in_specs=(same, ranks, same, same, ranks, ranks),
        out_specs=(same, ranks, same, same, ranks),
        check_rep=False,
    ),
    donate_argnums=(0, 1, 2, 3),
)


def to_global(tree, spec_):
    return multihost_utils.host_local_array_to_global_array(tree, mesh, spec_)


params = to_global(variables["params"], same)
stats = to_global(jax.tree.map(lambda a: a[None], variables.get("batch_stats", {})), ranks)
opt_state = to_global(optimizer.init(variables["params"]), same)
key = to_global(key, same)
data = SyntheticData(spec["seed"], rank, spec["batch_size"], side, spec["classes"], "NHWC")
batches = [to_global((np.asarray(x, np.float32), np.asarray(y, np.int32)), ranks) for x, y in data.batches]

for i in range(spec["warmup"]):
    params, stats, opt_state, key, loss = step(params, stats, opt_state, key, *batches[i % len(batches)])
jax.block_until_ready(loss)
start = time.perf_counter()
for i in range(spec["warmup"], spec["warmup"] + spec["iterations"]):
    params, stats, opt_state, key, loss = step(params, stats, opt_state, key, *batches[i % len(batches)])
jax.block_until_ready((params, loss))
elapsed = time.perf_counter() - start
if rank == 0:
    print(json.dumps({"throughput_img_per_s": size * spec["batch_size"] * spec["iterations"] / elapsed}), flush=True)
if size > 1:
    jax.distributed.shutdown()
from mpi4py import MPI  # noqa: E402

MPI.Finalize()
