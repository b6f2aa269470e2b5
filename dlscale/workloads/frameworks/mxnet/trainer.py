"""MXNet data-parallel training through horovod.mxnet's DistributedTrainer, one method per phase.

MXNet's engine runs every operation asynchronously, also on CPU, and `mx.nd.waitall()` is the one wait:
native timing pushes the whole step and waits at each iteration's end (`ahead` 0: `wait_to_read` also
waits for the in-place updates queued after it). overlap is one allreduce per gradient, sequential one
grouped allreduce (num_groups=1). Its SGD with momentum equals PyTorch's at a constant learning rate.
"""

import json
import os

import horovod
import horovod.mxnet as hvd
import mxnet as mx
import numpy as np

from dlscale.workloads import trainer
from dlscale.workloads.devices import check_precision, gpu_for_rank, nvidia_smi_name, resolve_layout
from dlscale.workloads.frameworks.mxnet import LABEL, NAME
from dlscale.workloads.registry import build_model

# The build features (mx.runtime.Features) that name MXNet's math libraries.
MATH_FEATURES = {
    "BLAS_OPEN": "OpenBLAS",
    "BLAS_MKL": "MKL",
    "BLAS_ATLAS": "ATLAS",
    "BLAS_APPLE": "Accelerate",
    "MKLDNN": "oneDNN (MKLDNN)",
    "OPENMP": "OpenMP",
    "CPU_AVX": "kernels for AVX",
    "CPU_AVX2": "kernels for AVX2",
}


class Trainer(trainer.Trainer):
    name = NAME

    def __init__(self, spec):
        self.layout = resolve_layout(self.name, spec["layout"])
        hvd.init()
        self.rank, self.size, self.local_rank = hvd.rank(), hvd.size(), hvd.local_rank()
        check_precision(spec)
        self.spec_timing, self.spec_schedule = spec.get("timing", "phased"), spec["allreduce_schedule"]
        self.gpu = spec.get("device", "cpu") == "gpu"
        if self.gpu:
            build = "a CUDA build" if mx.runtime.Features().is_enabled("CUDA") else "a CPU-only build"
            index = gpu_for_rank(LABEL, mx.__version__, mx.context.num_gpus(), self.local_rank, build)
            self.ctx = mx.gpu(index)
        else:
            self.ctx = mx.cpu()
        self.amp = spec["precision"] == "mixed"
        if self.amp:
            from mxnet.contrib import amp

            amp.init()
            self._amp = amp
        mx.random.seed(spec["seed"])
        np.random.seed(spec["seed"])
        self.net = build_model(NAME, spec["model"], spec["classes"], spec["image_size"])
        self.net.initialize(mx.init.Xavier(), ctx=self.ctx)
        self.net.hybridize(static_alloc=True, static_shape=True)
        params = self.net.collect_params()
        hvd.broadcast_parameters(params, root_rank=0)
        self.params = [p for p in params.values() if p.grad_req != "null"]
        sgd = {"learning_rate": spec["lr"], "momentum": spec["momentum"]}
        self.trainer = hvd.DistributedTrainer(
            params, "sgd", sgd, num_groups=0 if self.spec_schedule == "overlap" else 1
        )
        if self.amp:
            self._amp.init_trainer(self.trainer)
        self.loss_fn = mx.gluon.loss.SoftmaxCrossEntropyLoss()
        self.hvd = hvd
        shape = (spec["batch_size"], 3, spec["image_size"], spec["image_size"])
        host = mx.cpu_pinned() if self.gpu else mx.cpu()
        self.staging_x = mx.nd.empty(shape, ctx=host)
        self.staging_y = mx.nd.empty((spec["batch_size"],), ctx=host)
        self.profile_file = None

    def describe(self):
        features = mx.runtime.Features()
        return trainer.Description(
            name=NAME,
            version=mx.__version__,
            horovod=horovod.__version__,
            # the engine runs each allreduce as its gradient appears, unless phased or one group
            comm_overlaps_backward=self.spec_timing == "native" and self.spec_schedule == "overlap",
            layout=self.layout,
            device=str(self.ctx),
            gpu_name=nvidia_smi_name(self.ctx.device_id) if self.gpu else None,
            cuda=features.is_enabled("CUDA"),
            autotune=os.environ.get("MXNET_CUDNN_AUTOTUNE_DEFAULT", "1") != "0",
            tf32=os.environ.get("NVIDIA_TF32_OVERRIDE") != "0",
            onednn=features.is_enabled("MKLDNN"),
            math_build=", ".join(MATH_FEATURES[f] for f in MATH_FEATURES if features.is_enabled(f)) or "not reported",
            precision="mixed (contrib.amp float16)" if self.amp else "fp32",
            # MXNet takes its threads from the environment (set by the launcher)
            intra_op_threads=int(os.environ.get("OMP_NUM_THREADS", "0")) or None,
            inter_op_threads=int(os.environ.get("MXNET_CPU_WORKER_NTHREADS", "1")),
            extra={"hybridized": True},
        )

    def gradient_sizes(self):
        return [p.data().size * np.dtype(p.data().dtype).itemsize for p in self.params]

    def sync(self):
        mx.nd.waitall()

    def load(self, batch):
        x, y = batch
        self.staging_x[:] = x
        self.staging_y[:] = y
        return self.staging_x, self.staging_y

    def h2d(self, host):
        return tuple(t.as_in_context(self.ctx) for t in host)

    def forward(self, batch):
        x, y = batch
        with mx.autograd.record():
            return self.loss_fn(self.net(x), y).mean()

    def backward(self, loss):
        if self.amp:
            with self._amp.scale_loss(loss, self.trainer) as scaled:
                mx.autograd.backward(scaled)
        else:
            loss.backward()

    def comm(self):
        self.trainer.allreduce_grads()

    def update(self):
        self.trainer.update(1)  # the loss is already a batch mean

    def loss_value(self, loss):
        return float(loss.asscalar())

    def checksum(self):
        return float(sum(np.sum(p.data().asnumpy(), dtype=np.float64) for p in self.params))

    def state(self):
        return [p.data().asnumpy().copy() for p in self.params]

    def profile_start(self, folder):
        self.profile_file = folder / "mxnet_profile.json"
        mx.profiler.set_config(profile_all=True, aggregate_stats=False, filename=str(self.profile_file))
        mx.profiler.set_state("run")

    def annotate(self, name):
        return _Task(name)

    def profile_stop(self):
        mx.nd.waitall()
        mx.profiler.set_state("stop")
        mx.profiler.dump()
        return _complete_events(self.profile_file)


_DOMAIN = None


class _Task:
    """An MXNet profiler task (a span in its trace) as a context manager."""

    def __init__(self, name):
        global _DOMAIN
        _DOMAIN = _DOMAIN or mx.profiler.Domain("dlscale")
        self.task = mx.profiler.Task(_DOMAIN, name)

    def __enter__(self):
        self.task.start()

    def __exit__(self, *exc):
        self.task.stop()


def _complete_events(path):
    """MXNet's Chrome trace as "X" events: operators (B/E pairs) and the loop's tasks (b/e pairs),
    without the C API calls and memory counters."""
    events = json.loads(path.read_text())["traceEvents"]
    out, open_ = [], {}
    for e in events:
        ph, cat = e.get("ph"), e.get("cat", "")
        if cat in ("MXNET_C_API", "Device Storage") or ph not in ("X", "B", "E", "b", "e"):
            continue
        if cat == "operator" and ph in ("b", "e"):  # the same operators again, as async pairs
            continue
        if ph == "X":
            out.append(
                {"name": e["name"], "ph": "X", "ts": e["ts"], "dur": e.get("dur", 0), "tid": e.get("tid"), "cat": cat}
            )
            continue
        key = (e.get("pid"), e.get("tid"), e.get("id"), e["name"])
        if ph in ("B", "b"):
            open_.setdefault(key, []).append(e)
        elif open_.get(key):
            b = open_[key].pop()
            out.append(
                {"name": e["name"], "ph": "X", "ts": b["ts"], "dur": e["ts"] - b["ts"], "tid": e.get("tid"), "cat": cat}
            )
    return out
