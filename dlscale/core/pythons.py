"""Other Pythons: whether one is this one, and running this package's module in one (with no dlscale of its own)."""

import os
import subprocess
import sys
from pathlib import Path

from dlscale.core import paths


def is_this_python(python):
    """Whether `python` is the interpreter running this code (then its work runs in this process)."""
    return Path(python).absolute() == Path(sys.executable).absolute()


def run_module(python, module, args):
    """`python -m module args` with this package on its path: its completed process, output captured."""
    argv = [str(python), "-m", module, *map(str, args)]
    return subprocess.run(argv, capture_output=True, text=True, env={**os.environ, "PYTHONPATH": str(paths.SOURCE)})
