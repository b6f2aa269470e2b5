"""The framework registry: each framework is one package `frameworks/<name>/`, listed in NAMES.

Its `__init__.py` declares NAME, LABEL, LAYOUTS, LIBRARIES, TRACE_RULES and the rest without importing
the framework, so that the pipeline and analysis read it anywhere; its modules (trainer, models, loader,
probe, weights, flops, data, instrument, pins) import it. A new framework is a package and its word in NAMES.
"""

import importlib
import importlib.util

NAMES = ("torch", "tensorflow", "mxnet", "jax")
# The reference networks: the others' weights are copied from it to prove the networks identical.
REFERENCE = "torch"
# The `allreduce_library` values: Horovod (one C++ core under every binding), each framework's own path.
HOROVOD, NATIVE = LIBRARIES = ("horovod", "native")
# GoogLeNet after its stem, as every framework's models.py builds it: three stages of inception modules
# (1x1, 3x3 reduce, 3x3, "5x5" reduce, "5x5", pool projection), each after a max pool (stride 2, ceil mode).
GOOGLENET_POOLS = (3, 3, 2)  # the pools' kernels
GOOGLENET_STAGES = (
    ((64, 96, 128, 16, 32, 32), (128, 128, 192, 32, 96, 64)),
    (
        (192, 96, 208, 16, 48, 64),
        (160, 112, 224, 24, 64, 64),
        (128, 128, 256, 24, 64, 64),
        (112, 144, 288, 32, 64, 64),
        (256, 160, 320, 32, 128, 128),
    ),
    ((256, 160, 320, 32, 128, 128), (384, 192, 384, 48, 128, 128)),
)


class UnknownFramework(KeyError):
    def __str__(self):
        return f"unknown framework {self.args[0]!r}; known: {', '.join(NAMES)}"


def get(name):
    """The framework's declarations (its package, which imports no framework)."""
    if name not in NAMES:
        raise UnknownFramework(name)
    return importlib.import_module(f"{__name__}.{name}")


def module(name, part):
    """One of the framework's working modules (`trainer`, `models`, `loader`, ...), imported now."""
    get(name)
    return importlib.import_module(f"{__name__}.{name}.{part}")


def thread_env(threads):
    """A rank's environment for `threads` compute threads: every framework's THREAD_ENV (each reads its own)."""
    return {var: str(threads) for name in NAMES for var in get(name).THREAD_ENV}


def default_library(name):
    """The library a study without a `allreduce_library` key runs the framework with."""
    return get(name).LIBRARIES[0]


def not_built(name, library):
    """Why the framework does not run through `library` ("" when it does)."""
    declared = get(name)
    if library in declared.LIBRARIES:
        return ""
    return declared.NOT_BUILT.get(library, f"{declared.LABEL} has no {library} path in this tool")


def sweep_path(name, library):
    """The allreduce sweep's path for `name`'s gradients through `library`: Horovod's, or `name` (its own)."""
    if not_built(name, library):
        raise ValueError(not_built(name, library))
    return HOROVOD if library == HOROVOD else name


def binding_path(name):
    """The sweep's Horovod path through `name`'s binding (hand-overs differ: bench/results/instruments.csv)."""
    return f"{HOROVOD}:{name}"


def with_part(part):
    """The frameworks that have the working module `part` (e.g. a dataset format of their own)."""
    return [n for n in NAMES if importlib.util.find_spec(f"{__name__}.{n}.{part}") is not None]


def first_with(part, study):
    """Of `study`'s frameworks with `part` (a job any could do), the reference, else the first; or None."""
    having = [fw for fw in [REFERENCE, *NAMES] if fw in study and fw in with_part(part)]
    return having[0] if having else None
