"""TensorFlow's input pipeline: tf.data over the rank's TFRecord shards (tfdata.py)."""

from dlscale.workloads.frameworks.tfdata import records


def stream(feed):
    """The rank's endless stream of (images, labels) batches of a loaders.Feed (tf.data places them itself)."""
    return iter(records(feed))
