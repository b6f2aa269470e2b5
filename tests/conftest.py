import sys
from pathlib import Path

import pytest
import yaml

# The checkout is installed (editable) in the environment's overlay, .venv: `import harness` finds it.
ROOT = Path(__file__).resolve().parent.parent
# The environment record launch.launch needs: the tests' own interpreter.
ENV_RECORD = {"python": sys.executable, "key": "test", "mpi": {}, "pins": {}}


@pytest.fixture
def base_config():
    """The shipped default config, as a fresh dict."""
    return yaml.safe_load((ROOT / "config" / "config.yaml").read_text())


def tiny_config(tmp_path, **overrides):
    """A small study config (tinynet, few iterations) writing under tmp_path."""
    conf = yaml.safe_load((ROOT / "config" / "config.yaml").read_text())
    conf.update(
        framework=["torch", "mxnet"],
        model=["tinynet"],
        ranks_per_node=[1, 2],
        repeats=1,
        warmup=1,
        iterations=3,
        batch_size=[4],
        run_timeout_s=120,
        allreduce_max_bytes=1 << 20,
        results=str(tmp_path / "results"),
        data={"kind": "synthetic"},
        loader_workers=[0],
    )  # compute only; images: tests/test_loaders.py
    conf.update(overrides)
    return conf
