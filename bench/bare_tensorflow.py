"""A bare TensorFlow training loop, through Horovod or TensorFlow's own MultiWorkerMirroredStrategy
(the spec's allreduce_library): the whole step in one tf.function, no phases, no syncs, no records (the
benchmark's baseline). Same model, data, optimizer and threads as
dlscale.workloads.frameworks.tensorflow.trainer in overlap mode (Horovod: one allreduce per gradient; the
strategy: its collective all-reduce in 25 MiB packs, from the replica context; none on one rank),
on the same device: on the GPU
the host batch is copied in the step; mixed precision is the mixed_float16 policy with the same
dynamic loss scaling (halve on overflow and skip, double after 2000 good steps).

Usage (under mpirun): python bench/bare_tensorflow.py SPEC.json -> prints {"throughput_img_per_s": ...}
"""

import json
import os
import sys
import time
from pathlib import Path

import keras
import tensorflow as tf

from dlscale.workloads import rendezvous
from dlscale.workloads.batches import SyntheticData
from dlscale.workloads.registry import build_model

spec = json.loads(Path(sys.argv[1]).read_text())
native = spec.get("allreduce_library", "horovod") == "native"
tf.config.threading.set_intra_op_parallelism_threads(spec["threads_per_rank"])
tf.config.threading.set_inter_op_parallelism_threads(spec["threads_per_rank"])
if native:
    rank, size, local_rank = rendezvous.launcher_ranks()
else:
    import horovod.tensorflow as hvd

    hvd.init()
    rank, size, local_rank = hvd.rank(), hvd.size(), hvd.local_rank()
gpus = tf.config.list_physical_devices("GPU")
gpu = spec.get("device", "cpu") == "gpu"
tf.config.set_visible_devices([gpus[local_rank]] if gpu else [], "GPU")
if native and size > 1:  # before any operation; every rank's address and port from the launcher
    workers = rendezvous.peers(rendezvous.first_host())
    os.environ["TF_CONFIG"] = json.dumps({"cluster": {"worker": workers}, "task": {"type": "worker", "index": rank}})
    strategy = tf.distribute.MultiWorkerMirroredStrategy()
    worker = strategy.extended.worker_devices[0]
    packs = tf.distribute.experimental.CommunicationOptions(bytes_per_pack=25 * 1024 * 1024)


def average(grads):
    if native:

        def replica(*g):
            with tf.device(worker):
                g = [tf.identity(t) for t in g]
            return tf.distribute.get_replica_context().all_reduce(tf.distribute.ReduceOp.MEAN, g, options=packs)

        return list(strategy.run(replica, args=tuple(grads)))
    return [hvd.allreduce(g, op=hvd.Average, name=f"grad{i}") for i, g in enumerate(grads)]


amp = spec["precision"] == "mixed"
keras.mixed_precision.set_global_policy("mixed_float16" if amp else "float32")
keras.utils.set_random_seed(spec["seed"])
model = build_model("tensorflow", spec["model"], spec["classes"], spec["image_size"])
variables = [v.value for v in model.trainable_variables]
if not native:  # the strategy's ranks start from the same seed's weights
    hvd.broadcast_variables([v.value for v in model.variables], root_rank=0)
momentum = [tf.Variable(tf.zeros_like(v), trainable=False) for v in variables]
lr, mu = spec["lr"], spec["momentum"]
scale = tf.Variable(2.0**15 if amp else 1.0, trainable=False)
good = tf.Variable(0, trainable=False)
data = SyntheticData(spec["seed"], rank, spec["batch_size"], spec["image_size"], spec["classes"], "NHWC")
with tf.device("/CPU:0"):  # host memory, as the harness stages its batches
    batches = [(tf.constant(x), tf.constant(y)) for x, y in data.batches]


@tf.function
def step(x, y):
    with tf.GradientTape() as tape:
        logits = tf.cast(model(x, training=True), tf.float32)
        loss = tf.reduce_mean(tf.nn.sparse_softmax_cross_entropy_with_logits(labels=y, logits=logits))
        scaled = loss * scale  # scale 1 in fp32, as in the harness
    grads = tape.gradient(scaled, variables)
    if size > 1:  # one rank communicates nothing, as in the harness
        grads = average(grads)
    if not amp:
        for v, m, g in zip(variables, momentum, grads):
            m.assign(mu * m + g)
            v.assign_sub(lr * m)
        return loss
    grads = [tf.cast(g, tf.float32) / scale for g in grads]
    if tf.reduce_all([tf.reduce_all(tf.math.is_finite(g)) for g in grads]):
        for v, m, g in zip(variables, momentum, grads):
            m.assign(mu * m + g)
            v.assign_sub(lr * m)
        good.assign_add(1)
        if good >= 2000:
            scale.assign(scale * 2.0)
            good.assign(0)
    else:
        scale.assign(scale / 2.0)
        good.assign(0)
    return loss


for i in range(spec["warmup"]):
    step(*batches[i % len(batches)])
start = time.perf_counter()
for i in range(spec["warmup"], spec["warmup"] + spec["iterations"]):
    loss = step(*batches[i % len(batches)])
float(loss.numpy())
elapsed = time.perf_counter() - start
if rank == 0:
    print(json.dumps({"throughput_img_per_s": size * spec["batch_size"] * spec["iterations"] / elapsed}))
if not native:
    hvd.shutdown()
