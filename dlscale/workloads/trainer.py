"""The contract every framework's Trainer implements (one file per framework, looked up by name).

The loop (dlscale/workloads/train.py) calls only these. A phase method launches its work and returns; it
never waits for the device or engine: `sync()` is the one wait, and the loop decides where it goes
(after every phase in `phased` timing). `step()` is the framework's own fastest data-parallel step;
by default the phases in order, with no waits between.

Native timing never waits for an iteration before the next is queued where the framework can wait
for one iteration's end alone: `queued(loss)` marks the end of the iteration just queued, `finish`
waits for such a mark and reads the loss, and the loop queues iteration i+1 (its batch staged, its
kernels launched) before it finishes iteration i, `ahead` iterations at most (1: the device never
waits for the host between iterations, as in a bare loop). A framework whose only wait is for all
work (`sync`) keeps `ahead` 0: one wait at the end of each iteration.

Profiling (native timing's traced iterations): `profile_start(folder)` turns the framework's own
profiler on; `annotate(name)` is a context manager that records a span through the framework's own
annotation API (the loop wraps each traced iteration in one and times the same span on its own
perf_counter clock, which aligns the framework's clock to the loop's); `profile_stop()` turns it off and returns
the framework's events as Chrome trace events
(`ph` "X", `ts`/`dur` in microseconds on the framework's own clock, `name`, `tid`, `args`).
"""

import abc
import contextlib
import dataclasses


@dataclasses.dataclass
class Description:
    """What a framework reports of its run (each rank's provenance, `framework`): the same fields
    for every framework; `extra` holds what only one of them has."""

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
    # the math libraries its build runs its kernels in (BLAS, oneDNN, Eigen, XLA) with their
    # versions and the instruction set, as the framework itself reports them
    math_build: str
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
        """The order of the numpy batches `load` takes (PyTorch's tensors are NCHW whatever their
        memory format; its load converts into channels_last memory)."""
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
        """Copy the iteration's host batch (numpy arrays, or the framework's own tensors from its
        loader) into the framework's host staging buffers."""

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
        """One whole SGD iteration on the batch `fetch()` returns, with no wait inside; returns the
        loss handle."""
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
        """Wait until the iteration `handle` marks has ended; its loss as a float (no wait for later work
        where `ahead` > 0)."""
        self.sync()
        return self.loss_value(handle)

    def gradient_ready(self):
        """Seconds from the start of backward until each gradient was complete (of the iteration finished
        last, in native timing), or None where the framework does not report it."""
        return None

    def compile_times(self):
        """{what: {"s": seconds, "cache": "hit" | "miss"}} of what the framework compiled ahead of its
        first iterations (in warm-up, never in a measured time), or {} where it compiles nothing so."""
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
        """Whether `start_timeline` records Horovod's timeline: a run through Horovod (its module as
        `hvd`), not one through the framework's own collectives."""
        return getattr(self.hvd, "__name__", "").startswith("horovod")

    def start_timeline(self, path):
        """Horovod's timeline of this rank's communication from now on, into `path`."""
        self.hvd.start_timeline(str(path))

    def stop_timeline(self):
        self.hvd.stop_timeline()

    def shutdown(self):
        self.hvd.shutdown()
