"""PyTorch data-parallel training through Horovod, one method per SGD phase.

comm = "overlap": Horovod's DistributedOptimizer starts each gradient's allreduce from a backward
hook, so communication runs during backward; the comm phase is what the step still waits for
(`synchronize()`), and the update runs with synchronisation skipped.
comm = "sequential": backward completes, then one grouped allreduce (average) of all gradients in
place, then the update.
"""

import time

import horovod
import horovod.torch as hvd
import torch

from workloads.registry import build_model


class Trainer:
    layout = "NCHW"

    def __init__(self, spec):
        hvd.init()
        self.rank, self.size, self.local_rank = hvd.rank(), hvd.size(), hvd.local_rank()
        threads = spec["threads_per_rank"]
        torch.set_num_threads(threads)
        torch.set_num_interop_threads(threads)
        if spec["precision"] != "fp32":
            raise SystemExit(f"precision {spec['precision']!r} is not supported on CPU; use fp32")
        self.device = torch.device("cpu")
        torch.manual_seed(spec["seed"])
        self.model = build_model("torch", spec["model"], spec["classes"]).to(self.device)
        self.model.train()
        self.loss_fn = torch.nn.CrossEntropyLoss()
        opt = torch.optim.SGD(self.model.parameters(), lr=spec["lr"], momentum=spec["momentum"])
        hvd.broadcast_parameters(self.model.state_dict(), root_rank=0)
        hvd.broadcast_optimizer_state(opt, root_rank=0)
        self.overlap = spec["comm"] == "overlap"
        if self.overlap:
            opt = hvd.DistributedOptimizer(opt, named_parameters=self.model.named_parameters(),
                                           op=hvd.Average)
        self.optimizer = opt
        self.params = [p for p in self.model.parameters() if p.requires_grad]
        # When each gradient is complete during backward (host clock), for the layer-wise model.
        self.ready = [0.0] * len(self.params)
        for i, p in enumerate(self.params):
            p.register_post_accumulate_grad_hook(lambda _p, i=i: self._mark_ready(i))
        self.backward_start = 0.0
        self.hvd = hvd
        shape = (spec["batch_size"], 3, spec["image_size"], spec["image_size"])
        self.staging_x = torch.empty(shape, dtype=torch.float32)
        self.staging_y = torch.empty(spec["batch_size"], dtype=torch.int64)

    def describe(self):
        return {
            "name": "torch", "torch": torch.__version__, "horovod": horovod.__version__,
            "comm_overlaps_backward": self.overlap,
            "intra_op_threads": torch.get_num_threads(), "inter_op_threads": torch.get_num_interop_threads(),
            "mkldnn": torch.backends.mkldnn.is_available(), "layout": "NCHW", "device": str(self.device),
            "mpi_threads_supported": hvd.mpi_threads_supported(),
        }

    def sync(self):
        if self.device.type == "cuda":
            torch.cuda.synchronize(self.device)

    def load(self, batch):
        x, y = batch
        self.staging_x.copy_(torch.from_numpy(x))
        self.staging_y.copy_(torch.from_numpy(y))
        return self.staging_x, self.staging_y

    def h2d(self, host):
        return tuple(t.to(self.device, non_blocking=True) for t in host)

    def forward(self, batch):
        x, y = batch
        return self.loss_fn(self.model(x), y)

    def backward(self, loss):
        self.backward_start = time.perf_counter()
        loss.backward()

    def _mark_ready(self, i):
        self.ready[i] = time.perf_counter()

    def gradient_ready(self):
        """Seconds from the start of the last backward until each gradient was complete."""
        return [t - self.backward_start for t in self.ready]

    def gradient_sizes(self):
        return [p.numel() * p.element_size() for p in self.params]

    def comm(self):
        if self.overlap:
            self.optimizer.synchronize()
        else:
            hvd.grouped_allreduce_([p.grad for p in self.params], op=hvd.Average)

    def update(self):
        if self.overlap:
            with self.optimizer.skip_synchronize():
                self.optimizer.step()
        else:
            self.optimizer.step()
        self.optimizer.zero_grad()

    def loss_value(self, loss):
        return float(loss.item())

    def checksum(self):
        with torch.no_grad():
            return float(sum(p.double().sum() for p in self.params))

    def state(self):
        """Parameters as numpy arrays, in definition order (for correctness tests)."""
        return [p.detach().cpu().numpy().copy() for p in self.params]

    def shutdown(self):
        hvd.shutdown()
