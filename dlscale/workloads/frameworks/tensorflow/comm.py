"""How TensorFlow's gradients are averaged over the ranks (`allreduce_library`): Horovod or MultiWorkerMirroredStrategy.

native: the strategy must exist before any TensorFlow operation runs (`start()`); overlap averages in
packs of PACK_BYTES, which the executor starts as their gradients exist given 2+ inter-op threads (measured).
"""

import json
import os

import tensorflow as tf

from dlscale.core.vocabulary import NO_CYCLE_S
from dlscale.workloads import rendezvous
from dlscale.workloads.frameworks.tensorflow import ALLREDUCE_SCOPE, NATIVE

# The native overlap's pack size (DDP's bucket size: both own libraries fuse alike), the fusion threshold.
PACK_BYTES = 25 * 1024 * 1024


class Horovod:
    name = "horovod"

    def __init__(self):
        import horovod.tensorflow as hvd

        hvd.init()
        self.hvd = hvd
        self.rank, self.size, self.local_rank = hvd.rank(), hvd.size(), hvd.local_rank()

    def start(self):
        """Nothing to start: Horovod's background thread runs since init."""

    def broadcast(self, variables):
        self.hvd.broadcast_variables(variables, root_rank=0)

    def allreduce(self, grads, overlap):
        hvd = self.hvd
        if overlap:
            return [hvd.allreduce(g, op=hvd.Average, name=f"grad{i}") for i, g in enumerate(grads)]
        return hvd.grouped_allreduce(grads, op=hvd.Average)

    def overlaps_backward(self, overlap, native):
        # no per-gradient hook: only in the native step's compiled function does an allreduce start early
        return overlap and native

    def describe(self, overlap, grad_bytes):
        import horovod

        return horovod.__version__, {"allreduce_library": f"Horovod {horovod.__version__}"}


class Native:
    name = "native"

    def __init__(self):
        self.rank, self.size, self.local_rank = rendezvous.launcher_ranks()
        self.workers = rendezvous.peers(rendezvous.first_host()) if self.size > 1 else []
        self.strategy = None

    def start(self):
        """The strategy, before any TensorFlow operation; a rank that cannot start or meet its peers stops the
        job, saying why (its peers would wait for ever)."""
        if self.size == 1:
            return
        os.environ["TF_CONFIG"] = json.dumps(
            {"cluster": {"worker": self.workers}, "task": {"type": "worker", "index": self.rank}}
        )
        options = tf.distribute.experimental.CommunicationOptions(
            implementation=tf.distribute.experimental.CommunicationImplementation.AUTO
        )
        try:
            self.strategy = tf.distribute.MultiWorkerMirroredStrategy(communication_options=options)
        except Exception as exc:
            from mpi4py import MPI

            print(
                f"rank {self.rank} of {self.size}: TensorFlow's collective worker at {self.workers[self.rank]} "
                f"could not start or meet its peers {self.workers}: {exc}",
                flush=True,
            )
            MPI.COMM_WORLD.Abort(1)
        self.device = self.strategy.extended.worker_devices[0]

    def _reduce(self, tensors, op, pack_bytes):
        options = tf.distribute.experimental.CommunicationOptions(bytes_per_pack=pack_bytes)

        def replica(*values):
            with tf.device(self.device):  # the function's arguments carry no device of their own
                values = [tf.identity(v) for v in values]
            return tf.distribute.get_replica_context().all_reduce(op, values, options=options)

        return list(self.strategy.run(replica, args=tuple(tensors)))

    def broadcast(self, variables):
        """Rank 0's floating-point variables to every rank (a sum with the others' zeros); the rest
        (random-number state) is equal already, from the same seed."""
        floats = [v for v in variables if v.dtype.is_floating]

        @tf.function
        def from_rank0():
            mine = [v if self.rank == 0 else tf.zeros_like(v) for v in floats]
            with tf.name_scope(ALLREDUCE_SCOPE):
                return self._reduce(mine, tf.distribute.ReduceOp.SUM, 0)

        if self.size > 1:
            for v, value in zip(floats, from_rank0()):
                v.assign(value)

    def allreduce(self, grads, overlap):
        return self._reduce(list(grads), tf.distribute.ReduceOp.MEAN, PACK_BYTES if overlap else 0)

    def overlaps_backward(self, overlap, native):
        return overlap and tf.config.threading.get_inter_op_parallelism_threads() > 1

    def describe(self, overlap, grad_bytes):
        return "not used (tf.distribute)", {
            "allreduce_library": NATIVE if self.size > 1 else "none (one rank)",
            "fusion_threshold_bytes": PACK_BYTES if overlap else grad_bytes,
            "cycle_time_s": NO_CYCLE_S,
        }

    def start_timeline(self, path):
        """No Horovod: the collectives are in TensorFlow's own profiler's trace."""

    def stop_timeline(self):
        pass

    def shutdown(self):
        from mpi4py import MPI

        MPI.COMM_WORLD.Barrier()  # no rank leaves while a peer may still be in a collective
        MPI.Finalize()


LIBRARIES = {"horovod": Horovod, "native": Native}
