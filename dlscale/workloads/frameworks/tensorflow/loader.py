"""TensorFlow's input pipeline over a prepared dataset: tf.data over the rank's TFRecord shards
(dlscale/workloads/frameworks/tfdata.py; the shared recipe: dlscale/workloads/loaders.py)."""

from dlscale.workloads.frameworks.tfdata import records


def stream(feed):
    """The rank's endless stream of (images, labels) batches of a loaders.Feed (tf.data places them itself)."""
    return iter(records(feed))
