"""This dlscale's version and commit: a checkout asks git; an installed package reads the BUILD it was built with."""

import subprocess

from dlscale import __version__
from dlscale.core.paths import PACKAGE

BUILD = PACKAGE / "BUILD"  # the commit an sdist or wheel was built from (setup.py writes it)


def git_describe(folder):
    """`git describe --always --dirty` of the checkout at `folder`, or None (no git, not a checkout)."""
    try:
        out = subprocess.run(
            ["git", "-C", str(folder), "describe", "--always", "--dirty"], capture_output=True, text=True, timeout=10
        )
    except (OSError, subprocess.TimeoutExpired):
        return None
    return out.stdout.strip() or None


def commit():
    """The commit this dlscale is: the checkout's, else the one its package was built from, else said."""
    if (PACKAGE.parent / ".git").exists():  # the package's real folder, also when run through $DLSCALE_SOURCE
        return git_describe(PACKAGE) or "unknown (no git)"
    if BUILD.is_file():
        return f"{BUILD.read_text().strip()} (dlscale {__version__} installed)"
    return f"unknown: dlscale {__version__} installed, built outside a checkout"


def line():
    """`dlscale --version`'s line."""
    return f"dlscale {__version__} (commit {commit()})"
