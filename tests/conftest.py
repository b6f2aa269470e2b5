import json
import sys
from pathlib import Path

import pytest
import yaml

from dlscale.core import paths
from dlscale.core.vocabulary import STATUS
from dlscale.environment import build
from dlscale.runtime import emulate, execution, launchers

ROOT = Path(__file__).resolve().parent.parent  # the checkout (a study folder too)

# Snakemake as the tests run it: this interpreter's, without its lock (tests run studies side by
# side, each in its own folders), on two cores.
SNAKEMAKE = [sys.executable, "-m", "snakemake", "--nolock", "--cores", "2"]
# Emulated clusters need network namespaces and tc; where they cannot be made, the tests that need
# one skip with dlscale/runtime/emulate.py's reason.
EMULATION, WHY_NO_EMULATION = emulate.available()
needs_emulation = pytest.mark.skipif(not EMULATION, reason=WHY_NO_EMULATION or "emulated clusters available")

# The checkout is installed (editable) in the environment's overlay, .venv: `import dlscale` finds it.
# The environment record launch.launch needs: the tests' own interpreter.
ENV_RECORD = {"python": sys.executable, "key": "test", "mpi": {}, "pins": {}}


def mpirun_module(python, module, args, log, ranks=2, timeout_s=300):
    """`python -m module args` on `ranks` local ranks under mpirun, this checkout on their path, the
    output in `log`: (exit code, whether it timed out)."""
    command = [str(python), "-m", module, *map(str, args)]
    argv = launchers.local_argv(ranks, command, {"PYTHONPATH": str(paths.SOURCE)})
    return execution.execute(argv, log, timeout_s=timeout_s)


def assert_runs_ok(results, count):
    """Every one of a study's `count` runs ok: a failed one is named with its reasons and log's tail
    (a rare crash inside a framework must say which run and why, not only that a status differs)."""
    statuses = {p.parent.relative_to(results): json.loads(p.read_text()) for p in (results / paths.RUNS).rglob(STATUS)}
    failed = {str(run): (s["reasons"], s.get("log_tail")) for run, s in statuses.items() if s["status"] != "ok"}
    assert (len(statuses), failed) == (count, {}), f"{len(statuses)} runs of {count} made; failed: {failed}"


def env_record(framework):
    """The environment record a run of `framework` gets in a study: its own environment's (built
    once, as a study's first run of it builds it)."""
    return build.own_record(framework)


@pytest.fixture
def base_config():
    """The shipped default config, as a fresh dict."""
    return yaml.safe_load((ROOT / "config" / "config.yaml").read_text())


def tiny_run(**overrides):
    """One run's identity (the matrix keys and the repeat): by default PyTorch's tinynet on one rank,
    as tiny_config's studies run it."""
    run = {
        "framework": "torch",
        "model": "tinynet",
        "allreduce_schedule": "overlap",
        "allreduce_library": None,  # the framework's default
        "layout": "best",
        "timing": "native",
        "nodes": 1,
        "ranks_per_node": 1,
        "batch_size": 4,
        "threads_per_rank": 1,
        "loader_workers": 0,
        "repeat": 0,
    }
    unknown = set(overrides) - set(run)
    assert not unknown, f"not a run key: {unknown}"
    run = {**run, **overrides}
    if run["allreduce_library"] is None:
        from dlscale.workloads import frameworks

        run["allreduce_library"] = frameworks.default_library(run["framework"])
    return run


# The peak's multiply in a test's study: 512 takes 0.2 s a framework where the default 2048 takes
# 3-4 s (twice: free and bound), which every study of the suite paid (tests/test_flops.py measures 2048).
SMALL_MATMUL = 512


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
    conf["samples"] = None  # exactly `iterations` (tests/test_samples.py measures until enough)
    conf["second_pass"] = None  # exactly `repeats` (tests/test_second_pass.py adds repeats)
    conf["contention"] = {"trials": 0}  # no calibration (tests/test_contention.py makes them)
    conf["matmul_size"] = SMALL_MATMUL
    conf.update(overrides)
    return conf


# Test tiers. The fast tier is these modules: pure functions on small literal inputs (no MPI job,
# no Snakemake run, no framework training), less the tests in them marked `slow` by hand; every
# other test is `slow`. `pytest -m "not slow"` runs the fast tier (docs/contributing.md).
FAST_MODULES = {
    "test_architecture",
    "test_blocks",
    "test_caveats",
    "test_check_run",
    "test_comparisons",
    "test_config",
    "test_design",
    "test_figures",
    "test_hardware",
    "test_launch",
    "test_metrics",
    "test_model",
    "test_overhead_bench",
    "test_processes",
    "test_records",
    "test_run_cost",
    "test_samples",
    "test_suite_durations",
}


def pytest_collection_modifyitems(items):
    for item in items:
        if item.module.__name__.rsplit(".", 1)[-1] not in FAST_MODULES:
            item.add_marker(pytest.mark.slow)
