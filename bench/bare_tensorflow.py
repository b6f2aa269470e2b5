"""A bare TensorFlow + Horovod training loop: the whole step in one tf.function, no phases, no
syncs, no records (the benchmark's baseline). Same model, data, optimizer and threads as
workloads.frameworks.tensorflow.trainer in overlap mode (one allreduce per gradient; none on one rank), on the same
device: on the GPU
the host batch is copied in the step; mixed precision is the mixed_float16 policy with the same
dynamic loss scaling (halve on overflow and skip, double after 2000 good steps).

Usage (under mpirun): python bench/bare_tensorflow.py SPEC.json -> prints {"throughput_img_per_s": ...}
"""

import json
import sys
import time
from pathlib import Path

import horovod.tensorflow as hvd
import keras
import tensorflow as tf

from workloads.batches import SyntheticData
from workloads.registry import build_model

spec = json.loads(Path(sys.argv[1]).read_text())
tf.config.threading.set_intra_op_parallelism_threads(spec["threads_per_rank"])
tf.config.threading.set_inter_op_parallelism_threads(spec["threads_per_rank"])
hvd.init()
gpus = tf.config.list_physical_devices("GPU")
gpu = spec.get("device", "cpu") == "gpu"
tf.config.set_visible_devices([gpus[hvd.local_rank()]] if gpu else [], "GPU")
amp = spec["precision"] == "mixed"
keras.mixed_precision.set_global_policy("mixed_float16" if amp else "float32")
keras.utils.set_random_seed(spec["seed"])
model = build_model("tensorflow", spec["model"], spec["classes"], spec["image_size"])
variables = [v.value for v in model.trainable_variables]
hvd.broadcast_variables([v.value for v in model.variables], root_rank=0)
momentum = [tf.Variable(tf.zeros_like(v), trainable=False) for v in variables]
lr, mu = spec["lr"], spec["momentum"]
scale = tf.Variable(2.0**15 if amp else 1.0, trainable=False)
good = tf.Variable(0, trainable=False)
data = SyntheticData(spec["seed"], hvd.rank(), spec["batch_size"], spec["image_size"], spec["classes"], "NHWC")
with tf.device("/CPU:0"):  # host memory, as the harness stages its batches
    batches = [(tf.constant(x), tf.constant(y)) for x, y in data.batches]


@tf.function
def step(x, y):
    with tf.GradientTape() as tape:
        logits = tf.cast(model(x, training=True), tf.float32)
        loss = tf.reduce_mean(tf.nn.sparse_softmax_cross_entropy_with_logits(labels=y, logits=logits))
        scaled = loss * scale  # scale 1 in fp32, as in the harness
    grads = tape.gradient(scaled, variables)
    if hvd.size() > 1:  # one rank communicates nothing, as in the harness
        grads = [hvd.allreduce(g, op=hvd.Average, name=f"grad{i}") for i, g in enumerate(grads)]
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
if hvd.rank() == 0:
    print(json.dumps({"throughput_img_per_s": hvd.size() * spec["batch_size"] * spec["iterations"] / elapsed}))
hvd.shutdown()
