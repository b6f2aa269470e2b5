"""The prepared dataset JAX reads: TFRecord shards, the format TensorFlow reads too
(dlscale/workloads/frameworks/tfdata.py), written once where a study runs both (images.py `prepare`
writes a format once), by JAX's own Python where it runs without TensorFlow."""

from dlscale.workloads.frameworks.tfdata import COMMAND, FOLDER, FORMAT, SHARDED, write  # noqa: F401
