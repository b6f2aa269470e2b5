"""A rank's batches: synthetic, the same in every framework, or a dataset's through the framework's own loader."""

import time

import numpy as np

from dlscale.workloads import frameworks, loaders
from dlscale.workloads.images import Dataset

POOL = 4  # distinct synthetic batches per rank, used in turn
PROBE_BATCHES = 8
DRAIN_MOST, WAITED_S = 64, 5e-4


class SyntheticData:
    """Standard normal images and uniform labels, the same in every framework: rank r's batch k seeded (seed, r, k)."""

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
        """Stop the loader's workers (closing PyTorch's generator shuts its DataLoader's down)."""


class Images:
    """The rank's batches from its framework's own loader; calling it waits for the next one."""

    def __init__(self, stream):
        self.stream = stream

    def __call__(self, iteration):
        return next(self.stream)

    def close(self):
        """Stop the loader's workers (closing PyTorch's generator; the others' threads end with the process)."""
        if hasattr(self.stream, "close"):
            self.stream.close()


def open_data(trainer, spec):
    """(data, its description for the run record, with an image loader's own rate, `loader_img_per_s`)."""
    data = spec.get("data", {"kind": "synthetic"})
    if data["kind"] == "synthetic":
        return SyntheticData(
            spec["seed"], trainer.rank, spec["batch_size"], spec["image_size"], spec["classes"], trainer.data_layout
        ), {"kind": "synthetic"}

    dataset = Dataset(data["folder"])
    workers = spec["loader_workers"]
    # the framework's start-up work first: MXNet's engine starts asynchronously, and the loader's batches
    # queued behind it (MXNet AlexNet's loader: 38-50 img/s before this wait, 312-328 after)
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
