"""The prepared dataset in TensorFlow's own format (dlscale/workloads/images.py `prepare` writes every
framework's): TFRecord shards of tf.train.Examples (dlscale/workloads/frameworks/tfdata.py, which
JAX's package reads too)."""

from dlscale.workloads.frameworks.tfdata import COMMAND, FOLDER, FORMAT, SHARDED, write  # noqa: F401
