"""TensorFlow's input pipeline over a prepared dataset: tf.data over the rank's TFRecord shards
(dlscale/workloads/frameworks/tfdata.py; the shared recipe: dlscale/workloads/loaders.py)."""

from dlscale.workloads.frameworks.tfdata import records


def stream(dataset, rank, size, batch_size, image_size, workers, seed, pin=False):
    """The rank's endless stream of (images, labels) batches (tf.data places them itself)."""
    return iter(records(dataset, rank, size, batch_size, image_size, workers, seed))
