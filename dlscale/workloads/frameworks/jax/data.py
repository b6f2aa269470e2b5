"""The prepared dataset JAX reads: TFRecord shards, shared with TensorFlow (tfdata.py)."""

from dlscale.workloads.frameworks.tfdata import COMMAND, FOLDER, FORMAT, SHARDED, write  # noqa: F401
