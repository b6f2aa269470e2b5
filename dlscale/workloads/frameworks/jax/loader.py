"""JAX's input pipeline over a prepared dataset: tf.data, as JAX's and Flax's own ImageNet examples
feed JAX, handed over as numpy batches (`as_numpy_iterator`), NHWC, which the trainer places on its
device. The pipeline itself (the rank's TFRecord shards, the same decode, crop, flip and normalize
as every loader: dlscale/workloads/loaders.py) is dlscale/workloads/frameworks/tfdata.py's, which
TensorFlow's loader takes too, so both frameworks read the same records the same way."""

from dlscale.workloads.frameworks.tfdata import records


def stream(feed):
    """The rank's endless stream of (images, labels) numpy batches of a loaders.Feed."""
    return records(feed).as_numpy_iterator()
