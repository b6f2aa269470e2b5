"""An installed `dlscale` in a Python without the workload environment's packages (a user's venv, pipx):
build that environment (once) and run the same command there, its path holding only this dlscale (a
link to the package, $DLSCALE_SOURCE, which the ranks import too) so that no user's package shadows a pin."""

import hashlib
import importlib.util
import os
import sys

from dlscale.core import paths
from dlscale.environment import build, recipe

RERUN_ENV = "DLSCALE_RERUN"  # set in the re-run command: a second miss is an error, not a loop


def missing():
    """The workload environment's modules this Python lacks (none: the command runs here)."""
    return [m for m in recipe.WORKLOAD_IMPORTS if importlib.util.find_spec(m) is None]


def source_folder():
    """A folder holding only a link to this dlscale package (made once per installed package)."""
    key = hashlib.sha256(str(paths.PACKAGE).encode()).hexdigest()[:12]
    folder = build.env_root() / "source" / key
    folder.mkdir(parents=True, exist_ok=True)
    link = folder / "dlscale"
    if not link.is_symlink() or link.resolve() != paths.PACKAGE:
        tmp = folder / f".dlscale.{os.getpid()}"
        tmp.unlink(missing_ok=True)
        tmp.symlink_to(paths.PACKAGE, target_is_directory=True)
        tmp.replace(link)  # atomic: two commands starting at once both find a whole link
    return folder


def rerun(argv):
    """Replace this process with `dlscale argv` in the workload environment's Python, built if need be;
    build.EnvError where it cannot be built or the re-run command still lacks a module."""
    lacking = missing()
    if os.environ.get(RERUN_ENV):
        raise build.EnvError(
            f"the workload environment's Python ({sys.executable}) lacks {', '.join(lacking)}; "
            "remove the environment (`dlscale env path`) and build it again (`dlscale env build`)"
        )
    path = build.build()
    python = build.load_record(path)["python"]
    source = str(source_folder())
    pythonpath = os.pathsep.join(filter(None, [source, os.environ.get("PYTHONPATH")]))
    environ = {**os.environ, RERUN_ENV: "1", paths.SOURCE_ENV: source, "PYTHONPATH": pythonpath}
    what = f"dlscale: this Python lacks {', '.join(lacking)}: running in the workload environment {path}"
    print(what, file=sys.stderr, flush=True)
    sys.stdout.flush()
    os.execve(python, [python, "-m", "dlscale", *argv], environ)
