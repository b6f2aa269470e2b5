"""JAX data-parallel training through JAX's own collectives (collectives.py), one method per SGD phase.

`sync` (`block_until_ready` on what was launched last) is the one wait. Native timing is one jitted
`shard_map`ped step (steps.py), queued ahead on a GPU (`ahead` 1) but not on the CPU (`ahead` 0): a CPU
dispatch that takes donated buffers runs the step before it returns (measured, jax 0.6.2), so a step
queued ahead ran in the previous one's time (the 2026-11-26 study's JAX means 1/11 low).
"""

import logging
import os
import sys
from pathlib import Path

import flax
import jax
import jaxlib
import numpy as np
import optax
from mpi4py import MPI

from dlscale.core.vocabulary import NO_CYCLE_S
from dlscale.workloads import rendezvous, trainer
from dlscale.workloads.devices import DeviceError, check_precision, gpu_for_rank, resolve_layout
from dlscale.workloads.frameworks.jax import LABEL, NAME, collectives, hold_threads, profile, steps
from dlscale.workloads.registry import build_model


def _compilation_cache():
    """JAX's persistent compilation cache ($JAX_COMPILATION_CACHE_DIR, else the user's cache): a repeat
    loads its step (a GoogLeNet step's compilation took 27 s of a 71 s run); only warm-up changes."""
    default = Path(os.environ.get("XDG_CACHE_HOME", Path.home() / ".cache")) / "dlscale" / "jax-compilation"
    folder = os.environ.get("JAX_COMPILATION_CACHE_DIR") or str(default)
    jax.config.update("jax_compilation_cache_dir", folder)
    return folder


class Trainer(trainer.Trainer):
    name = NAME

    def __init__(self, spec):
        self.layout = resolve_layout(self.name, spec["layout"])
        hold_threads(spec["threads_per_rank"])
        self.threads = spec["threads_per_rank"]
        check_precision(spec)
        if spec["precision"] != "fp32":
            raise DeviceError("precision mixed: the JAX trainer runs fp32 only (mixed precision is not built for JAX)")
        self.compilation_cache = _compilation_cache()
        self.rank, self.size, self.local_rank = rendezvous.launcher_ranks()
        self.gpu = spec.get("device", "cpu") == "gpu"
        self.ahead = 1 if self.gpu else 0  # (the module's docstring: CPU dispatch of a donating step is not queued)
        with _PluginErrors() as plugins:  # the backends start with the mesh
            self.mesh = collectives.initialize(self.rank, self.size, rendezvous.first_host())
        self._check_device(plugins.messages)
        self.overlap = spec["allreduce_schedule"] == "overlap"
        self.lr, self.mu = spec["lr"], spec["momentum"]
        self._build(spec)
        self.pending = self.grads = self.vjp = None
        self.profile_dir, self.compiled = None, {}

    def _check_device(self, plugin_errors):
        """The device asked for, or a DeviceError (its reason the plugins' failures JAX logged, else printed)."""
        if self.gpu:
            count = len([d for d in jax.local_devices() if d.platform == "gpu"])
            build = f"its CUDA plugin did not start: {plugin_errors[-1]}" if plugin_errors else "a CPU-only jaxlib"
            gpu_for_rank(LABEL, jax.__version__, count, self.local_rank, build)
        elif jax.default_backend() != "cpu":
            raise DeviceError(f"device cpu: JAX's default backend is {jax.default_backend()}; set JAX_PLATFORMS=cpu")
        for message in plugin_errors:  # the device asked for is there
            print(f"JAX plugin error (logged, not raised): {message}", file=sys.stderr, flush=True)

    def _build(self, spec):
        self.model = build_model(NAME, spec["model"], spec["classes"], spec["image_size"])
        size = spec["image_size"]
        key = jax.random.PRNGKey(spec["seed"])
        image = np.zeros((1, size, size, 3), np.float32)
        variables = collectives.from_rank0(lambda k: self.model.init(k, image, train=False), key, self.rank, self.size)
        self.params, self.stats = variables["params"], variables.get("batch_stats", {})
        self.optimizer = optax.sgd(self.lr, momentum=self.mu)
        self.opt_state = self.optimizer.init(self.params)
        self.steps = steps.Steps(self.model, self.optimizer, self.mesh, self.size, self.overlap, self.rank)
        self.form = "local"  # or "native" (steps.py: the state's two forms)
        self.key = key  # the dropout masks' key, the same on every rank (each folds in its own rank)

    def _in_form(self, form):
        """The state in the form the next call takes (moved once, when the timing changes)."""
        if self.form != form:
            move = self.steps.to_native if form == "native" else self.steps.to_local
            self.params, self.stats, self.opt_state, self.key = move(self.params, self.stats, self.opt_state, self.key)
            self.form = form

    def describe(self):
        return trainer.Description(
            name=NAME,
            version=jax.__version__,
            horovod="not used (JAX's own collectives)",
            comm_overlaps_backward=self.overlap and self.size > 1,
            layout=self.layout,
            device=str(jax.local_devices()[0]),
            gpu_name=jax.local_devices()[0].device_kind if self.gpu else None,
            cuda=any(d.platform == "gpu" for d in jax.devices()),
            autotune=None,  # XLA picks its GPU algorithms itself (autotuning at compile time)
            tf32=jax.config.jax_default_matmul_precision not in (None, "highest", "float32"),
            onednn=False,  # XLA's CPU backend compiles its own kernels (Eigen for convolutions)
            math_build=f"XLA {jax.local_devices()[0].platform.upper()} (jaxlib {jaxlib.__version__}), Eigen",
            precision="fp32",
            intra_op_threads=self.threads,
            inter_op_threads=None,
            extra={
                "jaxlib": jaxlib.__version__,
                "flax": flax.__version__,
                "optax": optax.__version__,
                "allreduce_library": collectives.describe(self.size),
                # one pmean of every gradient, started as soon as traced: no fusion threshold, no cycle
                "fusion_threshold_bytes": sum(self.gradient_sizes()),
                "cycle_time_s": NO_CYCLE_S,
                "xla_flags": os.environ.get("XLA_FLAGS", ""),
                "pjrt_nproc": os.environ.get("PJRT_NPROC", ""),
                "compilation_cache": self.compilation_cache,
                "compiled": "jax.jit: forward, backward, comm, update (phased); the whole step (native)",
            },
        )

    def compile_times(self):
        return self.steps.compile_record

    def gradient_sizes(self):
        return [int(a.size) * a.dtype.itemsize for a in self.steps.ordered(self.params)]

    def sync(self):
        if self.pending is not None:
            jax.block_until_ready(self.pending)

    def load(self, batch):
        x, y = batch
        return np.asarray(x, np.float32), np.asarray(y, np.int32)

    def h2d(self, host):
        device = jax.local_devices()[0]
        self.pending = tuple(jax.device_put(t, device) for t in host)
        return self.pending

    def forward(self, batch):
        self._in_form("local")
        loss, self.vjp, self.stats, self.key = self.steps.forward(self.params, self.stats, *batch, self.key, self.rank)
        self.pending = loss
        return loss

    def backward(self, loss):
        self.grads = self.steps.backward(self.vjp)
        self.vjp, self.pending = None, self.grads

    def comm(self):
        if self.size > 1:
            self.grads = self.steps.mean(self.grads)
            self.pending = self.grads

    def update(self):
        self.params, self.opt_state = self.steps.update(self.params, self.opt_state, self.grads)
        self.grads, self.pending = None, self.params

    def step(self, fetch):
        with self.span("dlscale:io"):
            host = self.load(fetch())
        with self.span("dlscale:h2d"):
            dev = self.h2d(host)
        self._in_form("native")
        args = (self.params, self.stats, self.opt_state, self.key, *self.steps.batch(*dev))
        step = self.steps.native(*args)
        if self.profiling and not self.compiled:  # the compiled step's text names its operations' phases
            text = step.as_text()
            self.compiled[profile.module_name(text)] = text
        self.params, self.stats, self.opt_state, self.key, loss = step(*args)
        self.pending = (loss, self.params)
        return loss

    def finish(self, handle):
        # the step's outputs are ready together; its parameters were donated to the next step
        jax.block_until_ready(handle)
        return self.loss_value(handle)

    def loss_value(self, loss):
        return float(np.asarray(loss.addressable_data(0)).reshape(-1)[0])  # native: this rank's of all ranks'

    def checksum(self):
        return float(sum(np.sum(a, dtype=np.float64) for a in self.state()))

    def state(self):
        """This rank's weights as numpy arrays, in PyTorch's order, in either form."""
        return [np.array(a.addressable_data(0)) for a in self.steps.ordered(self.params)]

    def profile_start(self, folder):
        self.profile_dir, self.compiled = folder / "jax", {}
        options = jax.profiler.ProfileOptions()
        options.host_tracer_level = 2  # XLA's CPU runtime records each operation it runs
        options.python_tracer_level = 0
        jax.profiler.start_trace(str(self.profile_dir), create_perfetto_trace=True, profiler_options=options)

    def annotate(self, name):
        return jax.profiler.TraceAnnotation(name)

    def profile_stop(self):
        jax.profiler.stop_trace()
        return profile.events(self.profile_dir, self.compiled)

    def start_timeline(self, path):
        """No Horovod: JAX's collectives are in its own profiler's trace."""

    def stop_timeline(self):
        pass

    def shutdown(self):
        """Leave JAX's coordination service, then MPI (mpirun counts a rank that does not finalize as failed)."""
        if self.size > 1:
            jax.distributed.shutdown()
        MPI.Finalize()


class _PluginErrors(logging.Handler):
    """What JAX logs while its backends start: a PJRT plugin that fails (CUDA without a GPU) is logged and
    JAX goes on with the CPU; its traceback was the run's reason ("Unknown CUPTI error 999"), now the GPU check's."""

    LOGGER = "jax._src.xla_bridge"

    def __init__(self):
        super().__init__(level=logging.WARNING)
        self.messages = []

    def emit(self, record):
        cause = record.exc_info[1] if record.exc_info else None
        self.messages.append(record.getMessage() + (f" ({type(cause).__name__}: {cause})" if cause else ""))

    def __enter__(self):
        logger = logging.getLogger(self.LOGGER)
        self.propagate, logger.propagate = logger.propagate, False
        logger.addHandler(self)
        return self

    def __exit__(self, *exc):
        logger = logging.getLogger(self.LOGGER)
        logger.removeHandler(self)
        logger.propagate = self.propagate
