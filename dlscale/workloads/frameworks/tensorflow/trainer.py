"""TensorFlow data-parallel training, one method per phase, through Horovod or MultiWorkerMirroredStrategy (comm.py).

The forward pass is a `tf.function` under an eager GradientTape, so backward runs its compiled gradient.
One rank communicates nothing (Horovod's TensorFlow allreduce has no size-1 shortcut). Keras 3 variables
are not tf.Variables: Horovod and the tape get each one's `.value`. Native timing is one compiled step
(`ahead` 0). Mixed precision's loss scale doubles after 2000 finite steps, halves (no update) otherwise.
"""

import keras
import numpy as np
import tensorflow as tf
from tensorflow.python.util import _pywrap_util_port  # IsMklEnabled: are oneDNN ops on

from dlscale.workloads import trainer
from dlscale.workloads.devices import check_precision, gpu_for_rank, resolve_layout
from dlscale.workloads.frameworks.tensorflow import ALLREDUCE_SCOPE, LABEL, NAME, UPDATE_SCOPE, comm
from dlscale.workloads.frameworks.tensorflow.xplane import host_events
from dlscale.workloads.registry import build_model


class Trainer(trainer.Trainer):
    name = NAME

    def __init__(self, spec):
        self.layout = resolve_layout(self.name, spec["layout"])
        tf.config.experimental.enable_tensor_float_32_execution(spec["tf32"])
        threads = spec["threads_per_rank"]
        tf.config.threading.set_intra_op_parallelism_threads(threads)
        tf.config.threading.set_inter_op_parallelism_threads(threads)
        self.net = comm.LIBRARIES[spec["allreduce_library"]]()
        self.rank, self.size, self.local_rank = self.net.rank, self.net.size, self.net.local_rank
        # what starts Horovod's timeline and shuts down: Horovod's module, or the native library
        self.hvd = getattr(self.net, "hvd", self.net)
        check_precision(spec)
        gpus = tf.config.list_physical_devices("GPU")
        self.gpu = spec.get("device", "cpu") == "gpu"
        if self.gpu:
            build = "a CUDA build" if tf.test.is_built_with_cuda() else "a CPU-only build"
            index = gpu_for_rank(LABEL, tf.__version__, len(gpus), self.local_rank, build)
            tf.config.set_visible_devices(gpus[index], "GPU")
            tf.config.experimental.set_memory_growth(gpus[index], True)
        elif gpus:
            tf.config.set_visible_devices([], "GPU")
        self.net.start()  # before any TensorFlow operation (the strategy's collectives need it)
        self.amp = spec["precision"] == "mixed"
        keras.mixed_precision.set_global_policy("mixed_float16" if self.amp else "float32")
        self.scale = tf.Variable(2.0**15 if self.amp else 1.0, trainable=False)
        self.good_steps = tf.Variable(0, trainable=False)
        keras.utils.set_random_seed(spec["seed"])
        self.model = build_model(NAME, spec["model"], spec["classes"], spec["image_size"])
        self.vars = [v.value for v in self.model.trainable_variables]
        self.net.broadcast([v.value for v in self.model.variables])
        self.momentum = [tf.Variable(tf.zeros_like(v), trainable=False) for v in self.vars]
        self.lr, self.mu = spec["lr"], spec["momentum"]
        self.overlap = spec["allreduce_schedule"] == "overlap"
        self.native = spec.get("timing", "phased") == "native"
        self._forward = tf.function(self._forward_fn)
        self._allreduce = tf.function(self._allreduce_fn)
        self._update = tf.function(self._update_fn)
        self._step = tf.function(self._step_fn)
        self.tape = self.grads = self.profile_dir = None

    def describe(self):
        gpus = tf.config.get_visible_devices("GPU")
        horovod, library = self.net.describe(self.overlap, sum(self.gradient_sizes()))
        return trainer.Description(
            name=NAME,
            version=tf.__version__,
            horovod=horovod,
            comm_overlaps_backward=self.net.overlaps_backward(self.overlap, self.native),
            layout=self.layout,
            device="gpu" if self.gpu else "cpu",
            gpu_name=tf.config.experimental.get_device_details(gpus[0]).get("device_name") if self.gpu else None,
            cuda=tf.test.is_built_with_cuda(),
            autotune=None,  # cuDNN's algorithm choice is TensorFlow's own, with no switch
            tf32=tf.config.experimental.tensor_float_32_execution_enabled(),
            onednn=_pywrap_util_port.IsMklEnabled(),
            # Eigen's kernels where oneDNN has none; the wheel's XLA, which the harness does not ask for
            math_build=f"Eigen, oneDNN {'on' if _pywrap_util_port.IsMklEnabled() else 'off'}, "
            f"XLA built in: {'yes' if _pywrap_util_port.IsBuiltWithXLA() else 'no'}",
            precision="mixed (mixed_float16, dynamic loss scaling)" if self.amp else "fp32",
            intra_op_threads=tf.config.threading.get_intra_op_parallelism_threads(),
            inter_op_threads=tf.config.threading.get_inter_op_parallelism_threads(),
            extra={
                "keras": keras.__version__,
                "compiled": "tf.function: forward, gradient, allreduce, update (phased); the whole step (native)",
                **library,
            },
        )

    def gradient_sizes(self):
        return [int(v.shape.num_elements()) * v.dtype.size for v in self.vars]

    def sync(self):
        if self.gpu:
            tf.test.experimental.sync_devices()

    def load(self, batch):
        x, y = batch
        with tf.device("/CPU:0"):  # staged in host memory: h2d is the real copy on the GPU
            return tf.convert_to_tensor(x), tf.convert_to_tensor(y)

    def h2d(self, host):
        if not self.gpu:
            return host
        with tf.device("/GPU:0"):
            return tuple(tf.identity(t) for t in host)

    def _forward_fn(self, x, y):
        logits = tf.cast(self.model(x, training=True), tf.float32)
        loss = tf.reduce_mean(tf.nn.sparse_softmax_cross_entropy_with_logits(labels=y, logits=logits))
        return loss, loss * self.scale

    def forward(self, batch):
        self.tape = tf.GradientTape()
        with self.tape:
            return self._forward(*batch)

    def backward(self, loss):
        self.grads = self.tape.gradient(loss[1], self.vars)  # of the scaled loss (scale 1 in fp32)
        self.tape = None

    def _allreduce_fn(self, grads):
        if self.size == 1:
            return list(grads)
        with tf.name_scope(ALLREDUCE_SCOPE):  # names in traces (TRACE_RULES)
            return self.net.allreduce(grads, self.overlap)

    def comm(self):
        self.grads = self._allreduce(self.grads)

    def _step_fn(self, x, y):
        with tf.GradientTape() as tape:
            loss, scaled = self._forward_fn(x, y)
        grads = tape.gradient(scaled, self.vars)
        self._update_fn(self._allreduce_fn(grads))
        return loss, scaled

    def step(self, fetch):
        with self.span("dlscale:io"):
            host = self.load(fetch())
        with self.span("dlscale:h2d"):
            dev = self.h2d(host)
        return self._step(*dev)

    def _update_fn(self, grads):
        with tf.name_scope(UPDATE_SCOPE):  # names in traces (TRACE_RULES)
            self._sgd(grads)

    def _sgd(self, grads):
        if not self.amp:
            for v, m, g in zip(self.vars, self.momentum, grads):
                m.assign(self.mu * m + g)
                v.assign_sub(self.lr * m)
            return
        grads = [tf.cast(g, tf.float32) / self.scale for g in grads]
        if tf.reduce_all([tf.reduce_all(tf.math.is_finite(g)) for g in grads]):
            for v, m, g in zip(self.vars, self.momentum, grads):
                m.assign(self.mu * m + g)
                v.assign_sub(self.lr * m)
            self.good_steps.assign_add(1)
            if self.good_steps >= 2000:
                self.scale.assign(self.scale * 2.0)
                self.good_steps.assign(0)
        else:
            self.scale.assign(self.scale / 2.0)
            self.good_steps.assign(0)

    def update(self):
        self._update(self.grads)
        self.grads = None

    def loss_value(self, loss):
        return float(loss[0].numpy())

    def checksum(self):
        return float(sum(np.sum(v.numpy(), dtype=np.float64) for v in self.vars))

    def state(self):
        return [v.numpy().copy() for v in self.vars]

    def profile_start(self, folder):
        self.profile_dir = folder / "tensorflow"
        tf.profiler.experimental.start(str(self.profile_dir))

    def annotate(self, name):
        return tf.profiler.experimental.Trace(name)

    def profile_stop(self):
        tf.profiler.experimental.stop()
        return host_events(self.profile_dir)
