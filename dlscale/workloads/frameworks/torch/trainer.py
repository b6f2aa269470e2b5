"""PyTorch data-parallel training, one method per SGD phase, through Horovod or torch.distributed (comm.py).

NHWC is channels_last. On a GPU, `sync` waits for this rank's compute stream only, not Horovod's NCCL
stream, so a running allreduce is not counted as backward; native timing queues the next iteration
before waiting for the last (`ahead` 1), so the GPU never idles while the host stages a batch.
"""

import re
import time

import torch

from dlscale.workloads import trainer
from dlscale.workloads.devices import check_precision, gpu_for_rank, resolve_layout
from dlscale.workloads.frameworks.torch import LABEL, NAME, comm
from dlscale.workloads.registry import build_model


def sgd(params, spec):
    """SGD with momentum (the bare loop's too); fused with mixed precision: unfused, GradScaler's non-finite
    check is read on the host every step, which idled the GPU (bench/results/overhead-gpu.csv)."""
    return torch.optim.SGD(params, lr=spec["lr"], momentum=spec["momentum"], fused=spec["precision"] == "mixed")


class Trainer(trainer.Trainer):
    name = NAME
    data_layout = "NCHW"

    def __init__(self, spec):
        self.layout = resolve_layout(self.name, spec["layout"])
        self.memory_format = torch.channels_last if self.layout == "NHWC" else torch.contiguous_format
        torch.backends.cudnn.benchmark = spec["autotune"]
        torch.backends.cuda.matmul.allow_tf32 = torch.backends.cudnn.allow_tf32 = spec["tf32"]
        self.gpu = spec.get("device", "cpu") == "gpu"
        self.net = comm.LIBRARIES[spec["allreduce_library"]](self.gpu)
        self.rank, self.size, self.local_rank = self.net.rank, self.net.size, self.net.local_rank
        # what starts Horovod's timeline and shuts down: Horovod's module, or the native library
        self.hvd = getattr(self.net, "hvd", self.net)
        threads = spec["threads_per_rank"]
        torch.set_num_threads(threads)
        torch.set_num_interop_threads(threads)
        check_precision(spec)
        self.device = self._device()
        self.amp = spec["precision"] == "mixed"
        self.scaler = torch.amp.GradScaler("cuda", enabled=self.amp)
        torch.manual_seed(spec["seed"])
        self.model = build_model(NAME, spec["model"], spec["classes"]).to(self.device)
        self.net.broadcast(self.model)
        self.model.to(memory_format=self.memory_format)
        self.model.train()
        self.params = [p for p in self.model.parameters() if p.requires_grad]
        self.loss_fn = torch.nn.CrossEntropyLoss()
        opt = sgd(self.model.parameters(), spec)
        # No broadcast_optimizer_state: momentum starts empty on every rank anyway, and Horovod's
        # broadcast fills it through a step on NCHW-contiguous zero gradients, which breaks
        # channels_last's gradient layout and cost 9% of every ResNet-50 step after it (measured).
        self.overlap = spec["allreduce_schedule"] == "overlap"
        self.model, self.optimizer = self.net.wrap(self.model, opt, self.overlap)
        self._watch_gradients()
        shape = (spec["batch_size"], 3, spec["image_size"], spec["image_size"])
        # Two staging buffers, used in turn: batch i+1 is staged while iteration i's copy may be queued
        # (ahead = 1); pinned in their layout (`.contiguous(memory_format=)` would unpin them).
        self.staging = [
            (
                torch.empty(shape, dtype=torch.float32, pin_memory=self.gpu, memory_format=self.memory_format),
                torch.empty(spec["batch_size"], dtype=torch.int64, pin_memory=self.gpu),
            )
            for _ in range(2)
        ]
        self.loads = 0
        self.ahead = 1 if self.gpu else 0  # on the CPU every operation has ended when it returns
        self.finished_events = None
        self.loss_host = [torch.empty((), dtype=torch.float32, pin_memory=True) for _ in range(2)] if self.gpu else None
        self.profiler = None

    def _device(self):
        """The rank's GPU (its local rank), or the CPU."""
        if not self.gpu:
            return torch.device("cpu")
        build = f"CUDA {torch.version.cuda}" if torch.version.cuda else "a CPU-only build"
        index = gpu_for_rank(LABEL, torch.__version__, torch.cuda.device_count(), self.local_rank, build)
        torch.cuda.set_device(index)
        return torch.device("cuda", index)

    def _watch_gradients(self):
        """When each gradient is complete during backward (host clock), for the layer-wise model."""
        self.ready = [0.0] * len(self.params)
        self.events, self.spare_events = (
            [[torch.cuda.Event(enable_timing=True) for _ in range(len(self.params) + 1)] for _ in range(2)]
            if self.gpu
            else (None, None)
        )
        for i, p in enumerate(self.params):
            p.register_post_accumulate_grad_hook(lambda _p, i=i: self._mark_ready(i))
        self.backward_start = 0.0

    def describe(self):
        horovod, extra = self.net.describe(self.overlap, sum(self.gradient_sizes()))
        return trainer.Description(
            name=NAME,
            version=torch.__version__,
            horovod=horovod,
            comm_overlaps_backward=self.overlap,
            layout=self.layout,
            device=str(self.device),
            gpu_name=torch.cuda.get_device_name(self.device) if self.gpu else None,
            cuda=torch.version.cuda is not None,
            autotune=torch.backends.cudnn.benchmark,
            tf32=torch.backends.cuda.matmul.allow_tf32,
            onednn=torch.backends.mkldnn.is_available() and torch.backends.mkldnn.enabled,
            math_build=math_build(torch.__config__.show()),
            precision="mixed (autocast float16, GradScaler)" if self.amp else "fp32",
            intra_op_threads=torch.get_num_threads(),
            inter_op_threads=torch.get_num_interop_threads(),
            extra={"cuda_version": torch.version.cuda, **extra},
        )

    def sync(self):
        if self.gpu:
            torch.cuda.current_stream(self.device).synchronize()

    def load(self, batch):
        x, y = batch
        staging_x, staging_y = self.staging[self.loads % 2]
        self.loads += 1
        staging_x.copy_(torch.as_tensor(x))
        staging_y.copy_(torch.as_tensor(y))
        return staging_x, staging_y

    def h2d(self, host):
        return tuple(t.to(self.device, non_blocking=True) for t in host)

    def forward(self, batch):
        x, y = batch
        with torch.autocast(self.device.type, dtype=torch.float16, enabled=self.amp):
            return self.loss_fn(self.model(x), y)

    def backward(self, loss):
        self.backward_start = time.perf_counter()
        if self.gpu:
            self.events[-1].record()
        self.scaler.scale(loss).backward()

    def _mark_ready(self, i):
        self.ready[i] = time.perf_counter()
        if self.gpu:  # on the GPU the gradient is done when the work queued so far is
            self.events[i].record()

    def gradient_ready(self):
        """Seconds from the start of the last backward until each gradient was complete (host clock on
        CPU; on the GPU CUDA events: the last finished iteration's in native timing)."""
        if self.gpu:
            events = self.finished_events or self.events
            return [events[-1].elapsed_time(e) / 1e3 for e in events[:-1]]
        return [t - self.backward_start for t in self.ready]

    def queued(self, loss):
        """On the GPU: the loss copied to pinned memory, an event after the iteration's work, and its
        gradient events (the next backward records into the other set)."""
        if not self.gpu:
            return loss
        host = self.loss_host[self.loads % 2]  # one per iteration in flight, as the staging buffers
        host.copy_(loss.detach(), non_blocking=True)
        end = torch.cuda.Event()
        end.record()
        handle, self.events = (end, host, self.events), self.spare_events
        self.spare_events = handle[2]
        return handle

    def finish(self, handle):
        if not self.gpu:
            return self.loss_value(handle)
        end, host, self.finished_events = handle
        end.synchronize()  # this iteration's work only, not the one queued after it
        return float(host)

    def gradient_sizes(self):
        return [p.numel() * p.element_size() for p in self.params]

    def comm(self):
        if self.overlap:
            self.net.wait(self.optimizer)
        elif self.size > 1:
            self.net.reduce([p.grad for p in self.params])

    def update(self):
        # GradScaler.step is optimizer.step() when fp32; with mixed precision it unscales the
        # (averaged) gradients and skips the step if any is not finite.
        with self.net.stepping(self.optimizer, self.overlap):
            self.scaler.step(self.optimizer)
        self.scaler.update()
        self.optimizer.zero_grad()

    def loss_value(self, loss):
        return float(loss.item())

    def checksum(self):
        with torch.no_grad():
            return float(sum(p.double().sum() for p in self.params))

    def state(self):
        return [p.detach().cpu().numpy().copy() for p in self.params]

    def profile_start(self, folder):
        cuda = [torch.profiler.ProfilerActivity.CUDA] if self.gpu else []
        self.profiler = torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CPU, *cuda])
        self.profiler.__enter__()

    def annotate(self, name):
        return torch.profiler.record_function(name)

    def profile_stop(self):
        self.profiler.__exit__(None, None, None)
        if self.gpu:
            events = [_kineto_event(e) for e in self.profiler.profiler.kineto_results.events() if e.duration_ns() > 0]
            # the annotations' device-side copies would be taken for the host's once the clocks are aligned
            events = [e for e in events if e["cat"] == "cpu" or not e["name"].startswith("dlscale:")]
        else:
            events = [
                {
                    "name": e.name,
                    "ph": "X",
                    "ts": e.time_range.start,
                    "dur": e.time_range.elapsed_us(),
                    "tid": e.thread,
                    "cat": str(e.device_type).split(".")[-1].lower(),
                }
                for e in self.profiler.events()
                if e.time_range.end > e.time_range.start
            ]
        self.profiler = None
        return events


def _kineto_event(e):
    """One GPU-path profiler event, with the ids that tie a kernel to the host operation that launched it."""
    device = str(e.device_type()).split(".")[-1].lower()
    tid = e.start_thread_id() if device == "cpu" else f"{device}{e.device_index()}:{e.device_resource_id()}"
    return {
        "name": e.name(),
        "ph": "X",
        "ts": e.start_ns() / 1e3,
        "dur": e.duration_ns() / 1e3,
        "tid": tid,
        "cat": device,
        "args": {"correlation": e.correlation_id(), "linked": e.linked_correlation_id()},
    }


# The lines of `torch.__config__.show()` that name its math libraries, and their short names.
MATH_LINES = (
    (r"Math Kernel Library Version (\S+)", "MKL {}"),
    (r"MKL-DNN (v\S+)", "oneDNN {}"),
    (r"BLAS_INFO=(\w+)", "BLAS {}"),
    (r"CPU capability usage: (\S+)", "kernels for {}"),
)


def math_build(config):
    """PyTorch's math libraries from its build configuration text (`torch.__config__.show()`)."""
    found = [(re.search(pattern, config), name) for pattern, name in MATH_LINES]
    return ", ".join(name.format(m.group(1)) for m, name in found if m) or "not reported"
