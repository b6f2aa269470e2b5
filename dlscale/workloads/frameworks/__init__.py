"""The framework registry: every framework the study compares is one package here,
`dlscale/workloads/frameworks/<name>/`, and this is the one list of them.

A framework's package holds everything that is particular to it. Its `__init__.py` declares what
the rest of the study asks of it without importing the framework itself (so the pipeline, the
configuration checks and the analysis can read it in an environment without the framework):
  NAME, LABEL             its word in configs, tables and paths; its name in messages
  MODULES                 the Python modules it is (what names it in code: tests/test_architecture.py)
  LAYOUTS, BEST_LAYOUT    the layouts its models run, and the one its developers recommend
  LAYOUT_NOTE             why it runs no other layout (None where it runs both)
  LOADER                  its input pipeline, as a run record describes it
  THREAD_ENV              the environment variables that hold its compute to a rank's threads
  HOROVOD_MODULE          its Horovod binding (where LIBRARIES has horovod), DATA_MODULES what
                          its loader imports for real images: with MODULES, what its runs need of a
                          Python (dlscale/runtime/environments.py)
  TRACE_RULES, trace_rest how its profiler's events map to the SGD phases (dlscale/analysis/trace.py)
  LIBRARIES               the communication libraries its gradients can go through (`horovod`,
                          `native`), its default first; NATIVE names its own, NOT_BUILT says why
                          one it lacks is not built
and its modules do the work, importing the framework:
  trainer.py   the Trainer (dlscale/workloads/trainer.py's contract)      models.py  its networks
  loader.py    stream(): its own input pipeline over a prepared dataset
  probe.py     matmul(): the matrix-multiply peak (dlscale/runtime/peak.py)
  weights.py   weights copied from the reference framework's network (tests/test_parity.py)
  data.py      (where it reads a prepared format) write(): the dataset in that format (TensorFlow
               and JAX share theirs, tfdata.py beside the packages: no package imports another's)
  flops.py     layers(): its convolution and fully connected layers, counted by dlscale/workloads/flops.py
  instrument.py  (where it has a Horovod binding) Horovod's allreduce of its tensors, for the
               allreduce sweep and the replays of a study that runs it (`first_with`)
  pins.py      its own environment, per variant, and what Horovod's build of it needs: read, not
               imported with the framework, by dlscale/environment/recipe.py
Adding a framework is one new package and its word in NAMES (the config schema takes this list;
tests/test_architecture.py counts it with a throwaway one, its pins included).
"""

import importlib
import importlib.util

NAMES = ("torch", "tensorflow", "mxnet", "jax")
# The framework whose network definitions are the reference: the others' weights are copied from
# it to prove the networks identical; a study that runs it counts its FLOPs per image on it and hands
# the allreduce sweep's and the replays' tensors to Horovod through its binding (`first_with`).
REFERENCE = "torch"
# The communication libraries a study compares (its `allreduce_library` dimension): Horovod, the same
# C++ core under every binding, and each framework's own data-parallel path.
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
    """The allreduce sweep's path that times the gradients' communication of `name` through
    `library`: Horovod's through the instrument's binding (`first_with("instrument")`), or the
    framework's own (its package's name, from its `sweep` part). A framework whose binding the sweep
    also timed has its own Horovod path besides (`binding_path`), which the model prefers."""
    if not_built(name, library):
        raise ValueError(not_built(name, library))
    return HOROVOD if library == HOROVOD else name


def binding_path(name):
    """The sweep's Horovod path through `name`'s own binding, where `name` is not the instrument: the
    Horovod core is the same C++ under every binding, but the hand-over of a framework's tensors is
    not, and it costs differently (bench/results/instruments.csv)."""
    return f"{HOROVOD}:{name}"


def with_part(part):
    """The frameworks that have the working module `part` (e.g. a dataset format of their own)."""
    return [n for n in NAMES if importlib.util.find_spec(f"{__name__}.{n}.{part}") is not None]


def first_with(part, study):
    """Of the frameworks `study`, the one whose `part` does a job any of them could (count the
    networks' FLOPs, hand tensors to Horovod): the reference where the study has it, else the first
    that has the part; None where none has. A study needs no framework it does not run."""
    having = [fw for fw in [REFERENCE, *NAMES] if fw in study and fw in with_part(part)]
    return having[0] if having else None
