"""JAX's input pipeline: tf.data (tfdata.py), as JAX's own ImageNet examples feed JAX, as NHWC numpy batches."""

from dlscale.workloads.frameworks.tfdata import records


def stream(feed):
    """The rank's endless stream of (images, labels) numpy batches of a loaders.Feed."""
    return records(feed).as_numpy_iterator()
