"""What a Python has for a study's runs: run inside that Python (a site module's, a container's, the
one dlscale builds), standard library only; prints one JSON object. A module is looked for, not imported
(a framework takes seconds), unless given with `--import` (a Horovod binding: its import says if it works).
"""

import argparse
import contextlib
import importlib
import importlib.metadata
import importlib.util
import json
import os
import platform
import shutil
import subprocess
import sys

TIMEOUT_S = 300  # importing TensorFlow and a Horovod binding on a busy node


def _version(module):
    """The version of the distribution that provides `module`'s top-level package, or None."""
    top = module.split(".")[0]
    for dist in importlib.metadata.packages_distributions().get(top, []):
        with contextlib.suppress(importlib.metadata.PackageNotFoundError):
            return importlib.metadata.version(dist)
    return None


def module_facts(module, load):
    """{found, version[, error]}: whether `module` is there (and, with `load`, imports)."""
    try:
        found = importlib.util.find_spec(module) is not None
    except (ImportError, ValueError) as exc:  # a parent package that is missing or fails
        return {"found": False, "version": None, "error": f"{type(exc).__name__}: {exc}"}
    facts = {"found": found, "version": _version(module) if found else None}
    if found and load:
        try:
            importlib.import_module(module)
        except Exception as exc:  # what the run would meet: said, not raised
            facts["error"] = f"{type(exc).__name__}: {exc}".splitlines()[0]
    return facts


def cuda_facts():
    """The CUDA runtimes installed as wheels, and whether this node has an NVIDIA driver."""
    runtimes = {
        dist.metadata["Name"]: dist.version
        for dist in importlib.metadata.distributions()
        if (dist.metadata["Name"] or "").lower().startswith("nvidia-cuda-runtime")
    }
    return {"runtime_wheels": runtimes, "driver": shutil.which("nvidia-smi") is not None}


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("modules", nargs="*", help="modules to look for")
    parser.add_argument("--import", dest="imports", action="append", default=[], help="a module to import")
    args = parser.parse_args(argv)
    modules = {m: module_facts(m, m in args.imports) for m in dict.fromkeys(args.modules + args.imports)}
    facts = {"python": sys.executable, "python_version": platform.python_version(), "modules": modules}
    facts["cuda"] = cuda_facts()
    print(json.dumps(facts, sort_keys=True))
    return 0


class ProbeError(RuntimeError):
    pass


def probe(python, modules, imports=(), source=None):
    """The probe's JSON from `python` (with the source tree `source` on its path) for `modules` and `imports`."""
    if not (os.path.isfile(python) and os.access(python, os.X_OK)):
        raise ProbeError(f"{python}: not an executable file")
    argv = [str(python), "-m", __name__, *modules, *(a for m in imports for a in ("--import", m))]
    env = {**os.environ, "PYTHONPATH": str(source), "TF_CPP_MIN_LOG_LEVEL": "2"} if source else None
    try:
        proc = subprocess.run(argv, capture_output=True, text=True, timeout=TIMEOUT_S, env=env)
    except subprocess.TimeoutExpired:
        raise ProbeError(f"{python}: the probe did not finish within {TIMEOUT_S} s") from None
    lines = proc.stdout.strip().splitlines()
    if proc.returncode != 0 or not lines:
        last = (proc.stderr.strip().splitlines() or ["no output"])[-1]
        raise ProbeError(f"{python}: the probe failed (exit code {proc.returncode}): {last}")
    return json.loads(lines[-1])


if __name__ == "__main__":
    sys.exit(main())
