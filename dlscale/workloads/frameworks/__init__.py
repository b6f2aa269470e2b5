"""The framework registry: each framework is one package `frameworks/<name>/`, listed in NAMES.

A package's `__init__.py` declares, without importing the framework (so the pipeline and analysis can
read it anywhere), NAME, LABEL, MODULES, LAYOUTS, BEST_LAYOUT, LAYOUT_NOTE, LOADER, THREAD_ENV,
HOROVOD_MODULE, DATA_MODULES, TRACE_RULES/trace_rest and LIBRARIES/NATIVE/NOT_BUILT. Its modules import
the framework: trainer, models, loader, probe, weights, flops, and where it has them data (its dataset
format; TensorFlow and JAX share tfdata.py), instrument (its Horovod binding) and pins (its environment,
read by dlscale/environment/recipe.py). Adding a framework is one new package and its word in NAMES.
"""

import importlib
import importlib.util

NAMES = ("torch", "tensorflow", "mxnet", "jax")
# The reference networks: the others' weights are copied from it to prove the networks identical.
REFERENCE = "torch"
# The `allreduce_library` values: Horovod (one C++ core under every binding), each framework's own path.
HOROVOD, NATIVE = LIBRARIES = ("horovod", "native")


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
    """The allreduce sweep's path timing `name`'s gradients through `library`: Horovod's (through the
    instrument's binding) or the framework's own (named after its package)."""
    if not_built(name, library):
        raise ValueError(not_built(name, library))
    return HOROVOD if library == HOROVOD else name


def binding_path(name):
    """The sweep's Horovod path through `name`'s own binding: the tensors' hand-over differs per binding
    and costs differently (bench/results/instruments.csv)."""
    return f"{HOROVOD}:{name}"


def with_part(part):
    """The frameworks that have the working module `part` (e.g. a dataset format of their own)."""
    return [n for n in NAMES if importlib.util.find_spec(f"{__name__}.{n}.{part}") is not None]


def first_with(part, study):
    """Of the frameworks `study`, the one whose `part` does a job any could (count FLOPs, hand tensors
    to Horovod): the reference if there, else the first with the part; None where none has it."""
    having = [fw for fw in [REFERENCE, *NAMES] if fw in study and fw in with_part(part)]
    return having[0] if having else None
