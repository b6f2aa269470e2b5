"""A bare MXNet + Horovod training loop: record, backward, trainer.step, with no wait until the
end (the engine pipelines iterations), no phases and no records (the benchmark's baseline).
Same model, data, optimizer, threads, device and precision as
dlscale.workloads.frameworks.mxnet.trainer in overlap mode:
on the GPU each step copies its batch from pinned host memory; mixed precision is contrib.amp.

Usage (under mpirun): python bench/bare_mxnet.py SPEC.json -> prints {"throughput_img_per_s": ...}
"""

import json
import sys
import time
from pathlib import Path

import horovod.mxnet as hvd
import mxnet as mx
import numpy as np

from dlscale.workloads.batches import SyntheticData
from dlscale.workloads.registry import build_model

spec = json.loads(Path(sys.argv[1]).read_text())
hvd.init()
gpu = spec.get("device", "cpu") == "gpu"
ctx = mx.gpu(hvd.local_rank()) if gpu else mx.cpu()
amp = spec["precision"] == "mixed"
if amp:
    from mxnet.contrib import amp as mx_amp

    mx_amp.init()
mx.random.seed(spec["seed"])
np.random.seed(spec["seed"])
net = build_model("mxnet", spec["model"], spec["classes"], spec["image_size"])
net.initialize(mx.init.Xavier(), ctx=ctx)
net.hybridize(static_alloc=True, static_shape=True)
params = net.collect_params()
hvd.broadcast_parameters(params, root_rank=0)
trainer = hvd.DistributedTrainer(params, "sgd", {"learning_rate": spec["lr"], "momentum": spec["momentum"]})
if amp:
    mx_amp.init_trainer(trainer)
loss_fn = mx.gluon.loss.SoftmaxCrossEntropyLoss()
data = SyntheticData(spec["seed"], hvd.rank(), spec["batch_size"], spec["image_size"], spec["classes"])
host = mx.cpu_pinned() if gpu else mx.cpu()
batches = [(mx.nd.array(x, ctx=host), mx.nd.array(y, ctx=host)) for x, y in data.batches]


def step(i):
    x, y = (t.as_in_context(ctx) for t in batches[i % len(batches)])
    with mx.autograd.record():
        loss = loss_fn(net(x), y).mean()
    if amp:
        with mx_amp.scale_loss(loss, trainer) as scaled:
            mx.autograd.backward(scaled)
    else:
        loss.backward()
    trainer.step(1)
    return loss


for i in range(spec["warmup"]):
    step(i)
mx.nd.waitall()
start = time.perf_counter()
for i in range(spec["warmup"], spec["warmup"] + spec["iterations"]):
    loss = step(i)
mx.nd.waitall()
elapsed = time.perf_counter() - start
if hvd.rank() == 0:
    print(json.dumps({"throughput_img_per_s": hvd.size() * spec["batch_size"] * spec["iterations"] / elapsed}))
hvd.shutdown()
