"""A bare PyTorch training loop, through Horovod or PyTorch's own DistributedDataParallel (the spec's
allreduce_library): no phases, no syncs, no records (the benchmark's baseline).

Usage (under mpirun): python bench/bare_torch.py SPEC.json  -> prints {"throughput_img_per_s": ...}
Same model, data, layout, optimizer, threads, device, precision and TF32 setting as
dlscale.workloads.frameworks.torch.trainer in overlap mode: on the GPU each step copies its batch from pinned
host memory, and mixed precision is autocast float16 with a GradScaler
(and the trainer's fused SGD). Horovod: its DistributedOptimizer.
native: the model wrapped in DistributedDataParallel (gloo on the CPU, NCCL on GPUs; its default buckets,
no per-forward buffer broadcast) as PyTorch's own examples write it, the process group meeting at rank 0's address.
"""

import datetime
import json
import sys
import time
from pathlib import Path

import torch

from dlscale.workloads import rendezvous
from dlscale.workloads.batches import SyntheticData
from dlscale.workloads.devices import resolve_layout
from dlscale.workloads.frameworks.torch.trainer import sgd
from dlscale.workloads.registry import build_model

spec = json.loads(Path(sys.argv[1]).read_text())
native = spec.get("allreduce_library", "horovod") == "native"
gpu = spec.get("device", "cpu") == "gpu"
if native:
    import torch.distributed as dist
    from torch.nn.parallel import DistributedDataParallel

    rank, size, local_rank = rendezvous.launcher_ranks()
    if size > 1:
        address, port = rendezvous.coordinator(rendezvous.first_host())
        dist.init_process_group(
            "nccl" if gpu else "gloo",
            init_method=f"tcp://{address}:{port}",
            rank=rank,
            world_size=size,
            timeout=datetime.timedelta(seconds=120),
        )
else:
    import horovod.torch as hvd

    from dlscale.workloads.frameworks.torch.comm import DenseView

    hvd.init()
    rank, size, local_rank = hvd.rank(), hvd.size(), hvd.local_rank()
torch.set_num_threads(spec["threads_per_rank"])
torch.set_num_interop_threads(spec["threads_per_rank"])
torch.manual_seed(spec["seed"])
device = torch.device("cuda", local_rank) if gpu else torch.device("cpu")
amp = spec["precision"] == "mixed"
scaler = torch.amp.GradScaler("cuda", enabled=amp)
fmt = torch.channels_last if resolve_layout("torch", spec.get("layout", "best")) == "NHWC" else torch.contiguous_format
torch.backends.cudnn.benchmark = spec.get("autotune", True)
# as the harness sets them (PyTorch leaves cuDNN's TF32 on by default; the harness follows the spec)
torch.backends.cuda.matmul.allow_tf32 = torch.backends.cudnn.allow_tf32 = spec.get("tf32", False)
model = build_model("torch", spec["model"], spec["classes"]).to(device)
if native:
    model.to(memory_format=fmt)
    if size > 1:  # DDP broadcasts rank 0's weights as it wraps
        model = DistributedDataParallel(model, device_ids=[local_rank] if gpu else None, broadcast_buffers=False)
    opt = sgd(model.parameters(), spec)
else:
    hvd.broadcast_parameters(model.state_dict(), root_rank=0)  # Horovod takes contiguous tensors
    model.to(memory_format=fmt)
    opt = sgd(model.parameters(), spec)
    opt = hvd.DistributedOptimizer(
        opt, named_parameters=model.named_parameters(), op=hvd.Average, compression=DenseView
    )  # channels_last gradients through their NHWC view
data = SyntheticData(spec["seed"], rank, spec["batch_size"], spec["image_size"], spec["classes"])


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
    if native:  # DDP has averaged the gradients by the end of backward
        scaler.step(opt)
    else:
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
if rank == 0:
    print(json.dumps({"throughput_img_per_s": size * spec["batch_size"] * spec["iterations"] / elapsed}))
if not native:
    hvd.shutdown()
elif size > 1:
    dist.destroy_process_group()
rendezvous.end()
