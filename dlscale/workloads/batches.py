"""Where a rank's batches come from: synthetic ones, the same in every framework, or the images of
a prepared dataset through its framework's own loader, whose own rate is probed before training."""

import time

import numpy as np

from dlscale.workloads import frameworks, loaders
from dlscale.workloads.images import Dataset

POOL = 4  # distinct synthetic batches per rank, used in turn


class SyntheticData:
    """Per-rank synthetic images and labels from numpy, identical for every framework.

    Batch k of rank r comes from the generator seeded with (seed, r, k); iteration i uses batch
    i mod POOL. Images are NCHW float32 standard normal, labels uniform over the classes. The pool is
    made before timing starts, in the framework's layout (NHWC is the same values transposed); the io
    phase then copies the iteration's batch into the framework's host staging buffer, the h2d phase
    moves it to the device.
    """

    def __init__(self, seed, rank, batch_size, image_size, classes, layout="NCHW"):
        self.batches = []
        for k in range(POOL):
            rng = np.random.default_rng([seed, rank, k])
            x = rng.standard_normal((batch_size, 3, image_size, image_size), dtype=np.float32)
            y = rng.integers(0, classes, size=batch_size, dtype=np.int64)
            if layout == "NHWC":
                x = np.ascontiguousarray(x.transpose(0, 2, 3, 1))
            self.batches.append((x, y))

    def __call__(self, iteration):
        return self.batches[iteration % len(self.batches)]

    def close(self):
        """Nothing runs beside the synthetic batches."""


class Images:
    """The rank's batches from its framework's own loader (dlscale/workloads/loaders.py); calling it waits
    for the next one (the iteration number is the synthetic data's concern only)."""

    def __init__(self, stream):
        self.stream = stream

    def __call__(self, iteration):
        return next(self.stream)

    def close(self):
        """Stop the loader's worker processes: closing PyTorch's stream (a generator) frees its
        DataLoader iterator, which shuts its workers down; tf.data's and ImageRecordIter's threads
        end with the process."""
        if hasattr(self.stream, "close"):
            self.stream.close()


def open_data(trainer, spec):
    """(data, its description for the run record). Image data: the loader is started and, before
    any training, PROBE_BATCHES batches are read from it alone, after the first (which waits for its
    workers to start) and those made ahead meanwhile (read until one is waited for: MXNet's
    ImageRecordIter holds more than its prefetch_buffer): their rate is the loader's own,
    `loader_img_per_s`."""
    data = spec.get("data", {"kind": "synthetic"})
    if data["kind"] == "synthetic":
        return SyntheticData(
            spec["seed"], trainer.rank, spec["batch_size"], spec["image_size"], spec["classes"], trainer.data_layout
        ), {"kind": "synthetic"}

    dataset = Dataset(data["folder"])
    workers = spec["loader_workers"]
    # the framework's start-up work first: MXNet's engine initializes and broadcasts the weights
    # asynchronously, and the loader's batches queued behind it (MXNet AlexNet's loader rate was
    # 38-50 img/s in the default study of 2026-11-23 and is 312-328 after this wait)
    trainer.sync()
    feed = loaders.Feed(
        dataset, trainer.rank, trainer.size, spec["batch_size"], spec["image_size"], workers, spec["seed"], trainer.gpu
    )
    stream = loaders.stream(trainer.name, feed)
    next(stream)  # waits for the workers to start
    for _ in range(DRAIN_MOST):  # take what was made ahead meanwhile, until a batch is waited for
        before = time.perf_counter()
        next(stream)
        if time.perf_counter() - before > WAITED_S:
            break
    start = time.perf_counter()
    for _ in range(PROBE_BATCHES):
        next(stream)
    rate = PROBE_BATCHES * spec["batch_size"] / (time.perf_counter() - start)
    return Images(stream), {
        **dataset.describe(),
        "loader_workers": workers,
        "loader_img_per_s": rate,
        "loader": frameworks.get(trainer.name).LOADER,
    }


PROBE_BATCHES = 8
DRAIN_MOST, WAITED_S = 64, 5e-4
