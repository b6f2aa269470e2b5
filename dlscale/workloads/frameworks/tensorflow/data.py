"""The prepared dataset TensorFlow reads: TFRecord shards, shared with JAX (tfdata.py)."""

from dlscale.workloads.frameworks.tfdata import COMMAND, FOLDER, FORMAT, SHARDED, write  # noqa: F401
