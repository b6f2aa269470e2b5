"""A bare PyTorch + Horovod training loop: no phases, no syncs, no records (the benchmark's baseline).

Usage (under mpirun): python bench/bare_torch.py SPEC.json  -> prints {"throughput_img_per_s": ...}
Same model, data, layout, optimizer, threads, device and precision as workloads.frameworks.torch.trainer in
overlap mode: on the GPU each step copies its batch from pinned host memory, and mixed precision is autocast
float16 with a GradScaler.
"""

import json
import sys
import time
from pathlib import Path

import horovod.torch as hvd
import torch

from workloads.batches import SyntheticData
from workloads.devices import resolve_layout
from workloads.frameworks.torch.comm import DenseView
from workloads.registry import build_model

spec = json.loads(Path(sys.argv[1]).read_text())
hvd.init()
torch.set_num_threads(spec["threads_per_rank"])
torch.set_num_interop_threads(spec["threads_per_rank"])
torch.manual_seed(spec["seed"])
gpu = spec.get("device", "cpu") == "gpu"
device = torch.device("cuda", hvd.local_rank()) if gpu else torch.device("cpu")
amp = spec["precision"] == "mixed"
scaler = torch.amp.GradScaler("cuda", enabled=amp)
fmt = torch.channels_last if resolve_layout("torch", spec.get("layout", "best")) == "NHWC" else torch.contiguous_format
torch.backends.cudnn.benchmark = spec.get("autotune", True)
model = build_model("torch", spec["model"], spec["classes"]).to(device)
hvd.broadcast_parameters(model.state_dict(), root_rank=0)  # Horovod takes contiguous tensors
model.to(memory_format=fmt)
opt = torch.optim.SGD(model.parameters(), lr=spec["lr"], momentum=spec["momentum"])
opt = hvd.DistributedOptimizer(
    opt, named_parameters=model.named_parameters(), op=hvd.Average, compression=DenseView
)  # channels_last gradients through their NHWC view
data = SyntheticData(spec["seed"], hvd.rank(), spec["batch_size"], spec["image_size"], spec["classes"])


def staged(a, memory_format=torch.contiguous_format):
    """The batch in host memory, pinned on the GPU path, in the model's layout."""
    t = torch.from_numpy(a)
    buf = torch.empty(t.shape, dtype=t.dtype, pin_memory=gpu, memory_format=memory_format)
    return buf.copy_(t)


batches = [(staged(x, fmt), staged(y)) for x, y in data.batches]
loss_fn = torch.nn.CrossEntropyLoss()


def step(i):
    x, y = (t.to(device, non_blocking=True) for t in batches[i % len(batches)])
    with torch.autocast(device.type, dtype=torch.float16, enabled=amp):
        loss = loss_fn(model(x), y)
    scaler.scale(loss).backward()
    opt.synchronize()
    with opt.skip_synchronize():
        scaler.step(opt)
    scaler.update()
    opt.zero_grad()
    return loss


for i in range(spec["warmup"]):
    step(i)
start = time.perf_counter()
for i in range(spec["warmup"], spec["warmup"] + spec["iterations"]):
    loss = step(i)
loss.item()  # waits for the device
elapsed = time.perf_counter() - start
if hvd.rank() == 0:
    print(json.dumps({"throughput_img_per_s": hvd.size() * spec["batch_size"] * spec["iterations"] / elapsed}))
hvd.shutdown()
