"""Records the commit a wheel or an sdist is built from in dlscale/BUILD (read by `dlscale --version`
and the report: an installed package is no checkout). Everything else is in pyproject.toml. The
commit is git's where the source is a checkout, else $DLSCALE_BUILD_COMMIT, else an sdist's own
dlscale/BUILD (a wheel built from it keeps it)."""

import os
import subprocess
from pathlib import Path

from setuptools import setup
from setuptools.command.build_py import build_py
from setuptools.command.sdist import sdist

HERE = Path(__file__).resolve().parent


def _commit():
    try:
        out = subprocess.run(
            ["git", "-C", str(HERE), "describe", "--always", "--dirty"], capture_output=True, text=True, timeout=10
        )
        found = out.stdout.strip() if (HERE / ".git").exists() else ""
    except (OSError, subprocess.TimeoutExpired):
        found = ""
    return found or os.environ.get("DLSCALE_BUILD_COMMIT", "")


class BuildPy(build_py):
    def run(self):
        super().run()
        commit = _commit()
        if commit:
            Path(self.build_lib, "dlscale", "BUILD").write_text(commit + "\n")


class Sdist(sdist):
    def make_release_tree(self, base_dir, files):
        super().make_release_tree(base_dir, files)
        commit = _commit()
        if commit:
            target = Path(base_dir, "dlscale", "BUILD")
            target.unlink(missing_ok=True)  # a hard link to the source tree's, if any
            target.write_text(commit + "\n")


setup(cmdclass={"build_py": BuildPy, "sdist": Sdist})
