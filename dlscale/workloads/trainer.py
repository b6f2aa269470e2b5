"""The contract every framework's Trainer implements; the training loop calls only these.

A phase method launches its work and returns; `sync()` is the one wait. Where a framework can wait for one
iteration alone (`queued` marks it, `finish` waits), native timing queues up to `ahead` (0 where `sync` is the
only wait). `annotate` spans align the profiler's clock to the loop's; `profile_stop` gives Chrome "X" events."""

import abc
import contextlib
import dataclasses


@dataclasses.dataclass
class Description:
    """What a framework reports of its run (in each rank's provenance); `extra`: what only one has."""

    name: str  # the framework's word (its package's NAME)
    version: str
    horovod: str
    comm_overlaps_backward: bool  # allreduces start while backward still runs, in this run
    layout: str
    device: str
    gpu_name: str | None
    cuda: bool  # the framework's build can use CUDA GPUs
    autotune: bool | None  # cuDNN autotuning (None: the framework has no such switch)
    tf32: bool
    onednn: bool  # its CPU kernels run in oneDNN
    math_build: str  # its kernels' math libraries, their versions and instruction set, as it reports them
    precision: str
    intra_op_threads: int | None
    inter_op_threads: int | None
    extra: dict = dataclasses.field(default_factory=dict)

    def record(self):
        return dataclasses.asdict(self)


class Trainer(abc.ABC):
    name = ""  # the framework's word in configs, tables and paths
    layout = "NCHW"  # the layout the run uses (resolved from the `layout` setting)

    @property
    def data_layout(self):
        """The order of the numpy batches `load` takes (PyTorch's are NCHW whatever the memory format)."""
        return self.layout

    rank = size = local_rank = 0
    hvd = None  # the framework's Horovod module (start_timeline, stop_timeline, shutdown)
    gpu = False  # the rank trains on a GPU (its loader then pins host memory)
    profiling = False  # set by the loop while the profiler is on
    ahead = 0  # iterations native timing queues before it finishes the one before (see the module)

    def span(self, name):
        """`annotate(name)` while profiling, else nothing (the harness's own io and h2d work)."""
        return self.annotate(name) if self.profiling else contextlib.nullcontext()

    @abc.abstractmethod
    def describe(self):
        """Versions and every setting the run used, a Description (recorded in each rank's provenance)."""

    @abc.abstractmethod
    def gradient_sizes(self):
        """Bytes of each gradient allreduced per iteration, in parameter order."""

    @abc.abstractmethod
    def sync(self):
        """Wait until all work launched so far is done."""

    @abc.abstractmethod
    def load(self, batch):
        """Copy the host batch (numpy arrays, or the loader's tensors) into the host staging buffers."""

    @abc.abstractmethod
    def h2d(self, host):
        """Move the staged batch to the device (the same buffers on the CPU)."""

    @abc.abstractmethod
    def forward(self, batch):
        """Forward pass and loss; returns the loss handle."""

    @abc.abstractmethod
    def backward(self, loss):
        """Backward pass (overlap mode: gradient allreduces may start during it)."""

    @abc.abstractmethod
    def comm(self):
        """Gradient communication still to do or wait for after backward (none on one rank)."""

    @abc.abstractmethod
    def update(self):
        """Optimizer step and clearing of gradients."""

    def step(self, fetch):
        """One whole SGD iteration on the batch `fetch()` returns, no wait inside; the loss handle."""
        with self.span("dlscale:io"):
            host = self.load(fetch())
        with self.span("dlscale:h2d"):
            dev = self.h2d(host)
        loss = self.forward(dev)
        self.backward(loss)
        self.comm()
        self.update()
        return loss

    @abc.abstractmethod
    def loss_value(self, loss):
        """The loss as a Python float."""

    @abc.abstractmethod
    def checksum(self):
        """Sum of all parameters (equal on every rank when gradients were averaged)."""

    @abc.abstractmethod
    def state(self):
        """Parameters as numpy arrays, in definition order (for correctness tests)."""

    def queued(self, loss):
        """A handle on the end of the iteration just queued (whose loss handle is `loss`), for `finish`."""
        return loss

    def finish(self, handle):
        """Wait until the iteration `handle` marks has ended (not later ones); its loss as a float."""
        self.sync()
        return self.loss_value(handle)

    def gradient_ready(self):
        """Seconds from backward's start until each gradient was complete, or None where not reported."""
        return None

    def compile_times(self):
        """{what: {"s": seconds, "cache": "hit" | "miss"}} compiled ahead, in warm-up ({}: none)."""
        return {}

    @abc.abstractmethod
    def profile_start(self, folder):
        """Turn the framework's profiler on, writing what it needs under `folder`."""

    @abc.abstractmethod
    def annotate(self, name):
        """Context manager: span `name` in the framework's trace (called while the profiler is on)."""

    @abc.abstractmethod
    def profile_stop(self):
        """Turn the profiler off; the framework's events as Chrome trace "X" events."""

    @property
    def writes_timeline(self):
        """Whether `start_timeline` records Horovod's timeline (a run through Horovod as `hvd`)."""
        return getattr(self.hvd, "__name__", "").startswith("horovod")

    def start_timeline(self, path):
        """Horovod's timeline of this rank's communication from now on, into `path`."""
        self.hvd.start_timeline(str(path))

    def stop_timeline(self):
        self.hvd.stop_timeline()

    def shutdown(self):
        self.hvd.shutdown()
