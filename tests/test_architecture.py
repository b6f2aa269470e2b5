"""The package's layers (dlscale/__init__.py): a module imports only its own layer and those below
it, and imports the project's modules at its top, except where it defers a heavy import and says so.
Then one owner for each fact: a framework's name, a phase, a results path."""

import ast
import inspect
import re
import shutil
import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace

import pytest
import yaml

from dlscale.core import paths
from dlscale.core.vocabulary import PHASES, seconds
from dlscale.environment import recipe
from dlscale.runtime import config as cfg
from dlscale.runtime import launchers
from dlscale.workloads import frameworks
from dlscale.workloads.registry import MODELS
from tests.conftest import ROOT

PACKAGE = ROOT / "dlscale"
LAYERS = ("core", "workloads", "environment", "runtime", "analysis", "cli", "__main__")  # bottom to top


def _layer(module):
    """The layer of a dlscale module (None for the package itself and for modules outside it)."""
    parts = module.split(".")
    return LAYERS.index(parts[1]) if parts[0] == "dlscale" and len(parts) > 1 and parts[1] in LAYERS else None


def _module(path, root):
    return ".".join(path.relative_to(root).with_suffix("").parts).removesuffix(".__init__")


def _project_imports(tree):
    """(line, module, whether in a function) of each import of a dlscale module."""
    functions = [f for f in ast.walk(tree) if isinstance(f, ast.FunctionDef | ast.AsyncFunctionDef)]
    inner = {id(n) for f in functions for n in ast.walk(f)}
    for node in ast.walk(tree):
        names = []
        if isinstance(node, ast.Import):
            names = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
            names = [f"{node.module}.{a.name}" if node.module == "dlscale" else node.module for a in node.names]
        for name in names:
            if name == "dlscale" or name.startswith("dlscale."):
                yield node.lineno, name, id(node) in inner


def layer_violations(root):
    """Upward imports, and imports inside a function without a comment saying why, under `root`."""
    found = []
    for path in sorted((root / "dlscale").rglob("*.py")):
        lines = path.read_text().splitlines()
        me = _layer(_module(path, root))
        for lineno, name, inner in _project_imports(ast.parse(path.read_text())):
            where = f"{path.relative_to(root)}:{lineno}"
            if me is not None and _layer(name) is not None and _layer(name) > me:
                found.append(f"{where}: {LAYERS[me]} imports {name} ({LAYERS[_layer(name)]}, above it)")
            elif inner and "#" not in lines[lineno - 1] and "#" not in lines[lineno - 2]:
                found.append(f"{where}: {name} imported in a function without saying why")
    return found


def test_layers_run_one_way():
    found = layer_violations(ROOT)
    assert not found, "\n".join(found)


def test_the_analysis_takes_the_ring_model_from_core_not_from_the_mpi_sweep():
    """The model's arithmetic (ring_time, fit_ring) and the sweep's message shapes are core/ring.py's,
    which the sweep (an MPI program) and the analysis both import."""
    for path in sorted((ROOT / "dlscale" / "analysis").glob("*.py")):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ImportFrom) and node.module in ("dlscale.runtime", "dlscale.runtime.allreduce"):
                names = {a.name for a in node.names}
                assert node.module == "dlscale.runtime" and "allreduce" not in names, f"{path}:{node.lineno}"


@pytest.mark.parametrize(
    "module, source",
    [
        ("core/vocabulary.py", "from dlscale.runtime import config\n"),  # a planted upward import
        ("workloads/trainer.py", "def f():\n    from dlscale.core import paths\n"),  # inside, unexplained
    ],
)
def test_the_layer_test_fails_on_a_planted_import(tmp_path, module, source):
    planted = tmp_path / "dlscale" / module
    planted.parent.mkdir(parents=True)
    planted.write_text(source)
    assert len(layer_violations(tmp_path)) == 1


def test_each_layer_is_a_folder_of_the_package():
    folders = {p.name for p in PACKAGE.iterdir() if p.is_dir() and (p / "__init__.py").exists()}
    assert folders == {*LAYERS[:-2]}, folders


# --- one owner for each fact -------------------------------------------------------------------

SCANNED = ("dlscale", "Snakefile", "bench")


def _words(name):
    """What names a framework in code: its word, its Python modules and its Horovod binding."""
    declared = frameworks.get(name)
    return {name, *declared.MODULES, f"horovod.{name}"}


def _sources():
    for entry in SCANNED:
        path = ROOT / entry
        yield from [path] if path.is_file() else sorted(p for p in path.rglob("*") if p.suffix in (".py", ".smk"))
    yield PACKAGE / "workflow" / "Snakefile"


def _names_in(path, words, imports=True):
    """The words `path` uses as a string or an import (Python), or quoted (Snakemake rules)."""
    if path.suffix != ".py":
        return {w for w in words if f'"{w}"' in path.read_text() or f"'{w}'" in path.read_text()}
    found = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Constant) and node.value in words:
            found.add(node.value)
        for module in _imports(node) if imports else []:
            found |= {w for w in words if module == w or module.startswith(w + ".")}
    return found


def _imports(node):
    if isinstance(node, ast.Import):
        return [alias.name for alias in node.names]
    if isinstance(node, ast.ImportFrom) and node.module and not node.level:
        return [node.module]
    return []


# Outside the frameworks' packages, by design: bench/ holds each framework's bare training loop, written
# apart from the harness on purpose, and the benchmarks that run them; dlscale/environment/gpunode.py
# builds Horovod for a GPU node's own PyTorch, which it asks for the GPU's compute capability (the
# environments' recipe reads every framework's pins from its package). And one module beside the
# frameworks' packages: the tf.data pipeline over TFRecord shards, which TensorFlow's and JAX's
# packages both read, so that neither imports the other's.
BY_DESIGN = (
    ROOT / "bench",
    PACKAGE / "environment" / "gpunode.py",
    PACKAGE / "workloads" / "frameworks" / "tfdata.py",
)


def test_no_frameworks_package_imports_another_ones():
    base = "dlscale.workloads.frameworks"
    for name in frameworks.NAMES:
        for path in sorted((PACKAGE / "workloads" / "frameworks" / name).glob("*.py")):
            for node in ast.walk(ast.parse(path.read_text())):
                modules = _imports(node)
                if isinstance(node, ast.ImportFrom) and node.module == base:
                    modules = [f"{base}.{a.name}" for a in node.names]
                others = [m for m in modules for o in frameworks.NAMES if o != name and m.startswith(f"{base}.{o}")]
                assert not others, f"{path.relative_to(ROOT)}:{node.lineno} imports {others}"


def test_only_a_frameworks_own_package_names_it():
    registry = PACKAGE / "workloads" / "frameworks" / "__init__.py"
    stray = []
    for name in frameworks.NAMES:
        own = PACKAGE / "workloads" / "frameworks" / name
        for path in _sources():
            if path == registry or path.is_relative_to(own) or any(path.is_relative_to(d) for d in BY_DESIGN):
                continue
            if found := _names_in(path, _words(name)):
                stray.append(f"{path.relative_to(ROOT)}: {', '.join(sorted(found))}")
    assert not stray, "framework names outside their package:\n" + "\n".join(stray)


def test_only_the_vocabulary_spells_a_phase():
    """Phase names and their seconds columns (`overlap` is also a value of the allreduce schedule,
    so it is left out of the search; `comm` names the communication phase only since 0.3.0)."""
    words = set(PHASES) | {seconds(p) for p in PHASES} | {"comm_total"}
    vocabulary = PACKAGE / "core" / "vocabulary.py"
    stray = [
        f"{path.relative_to(ROOT)}: {', '.join(sorted(found))}"
        for path in _sources()
        if path != vocabulary and path.relative_to(ROOT).parts[0] != "bench"
        if (found := _names_in(path, words, imports=False))
    ]
    assert not stray, "phase names typed outside dlscale/core/vocabulary.py:\n" + "\n".join(stray)


def test_the_names_search_finds_what_it_looks_for(tmp_path):
    """The searches above can fail: a string, an import and a quoted word in a rule are found."""
    (tmp_path / "a.py").write_text('import horovod.torch as hvd\nx = {"backward_s": 1}\n')
    (tmp_path / "b.smk").write_text('rule r:\n    params: fw="mxnet"\n')
    assert _names_in(tmp_path / "a.py", _words("torch")) == {"horovod.torch"}
    assert _names_in(tmp_path / "a.py", {"backward_s"}) == {"backward_s"}
    assert _names_in(tmp_path / "b.smk", _words("mxnet")) == {"mxnet"}


def test_no_function_over_50_lines_outside_tests_and_bench():
    long = [
        f"{path.relative_to(ROOT)}:{node.lineno} {node.name} ({node.end_lineno - node.lineno + 1} lines)"
        for path in _sources()
        if path.suffix == ".py" and path.relative_to(ROOT).parts[0] != "bench"
        for node in ast.walk(ast.parse(path.read_text()))
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and node.end_lineno - node.lineno + 1 > 50
    ]
    assert not long, "functions over 50 lines:\n" + "\n".join(long)


# The package's size when issue 60 asked that its restructuring add none (2026-11-27): a change that
# adds lines takes as many out, so the package grows in what it does, not in how it says it.
LINE_BUDGET = 14_869


def package_lines(root):
    """{path: lines} of the package's Python files under `root` (as `wc -l` counts them)."""
    return {p.relative_to(root): len(p.read_text().splitlines()) for p in sorted((root / "dlscale").rglob("*.py"))}


def test_the_package_stays_within_its_line_budget(tmp_path):
    counted = package_lines(ROOT)
    largest = sorted(counted.items(), key=lambda item: -item[1])[:5]
    assert sum(counted.values()) <= LINE_BUDGET, (
        f"dlscale/ has {sum(counted.values())} lines of Python, over its budget of {LINE_BUDGET}; "
        "the largest: " + ", ".join(f"{p} ({n})" for p, n in largest)
    )
    (tmp_path / "dlscale").mkdir()
    (tmp_path / "dlscale" / "m.py").write_text("a = 1\nb = 2\n")
    assert package_lines(tmp_path) == {Path("dlscale/m.py"): 2}


MAX_PARAMETERS = 6


def parameters(node):
    """How many parameters a function takes (self or cls not counted; *args and **kwargs one each)."""
    a = node.args
    count = len(a.posonlyargs) + len(a.args) + len(a.kwonlyargs) + (a.vararg is not None) + (a.kwarg is not None)
    return count - (bool(a.args) and a.args[0].arg in ("self", "cls"))


def too_many_parameters(root):
    """The functions of the package under `root` that take more than MAX_PARAMETERS."""
    return [
        f"{path.relative_to(root)}:{node.lineno} {node.name} ({parameters(node)})"
        for path in sorted((root / "dlscale").rglob("*.py"))
        for node in ast.walk(ast.parse(path.read_text()))
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and parameters(node) > MAX_PARAMETERS
    ]


def test_no_function_of_the_package_takes_more_than_6_parameters(tmp_path):
    """Related arguments travel together (a dataclass), not as a long list; the search finds a planted one."""
    assert not too_many_parameters(ROOT), "functions with more than 6 parameters:\n" + "\n".join(
        too_many_parameters(ROOT)
    )
    (tmp_path / "dlscale").mkdir()
    (tmp_path / "dlscale" / "m.py").write_text("class C:\n    def f(self, a, b, c, d, e, g, *h):\n        pass\n")
    assert too_many_parameters(tmp_path) == ["dlscale/m.py:2 f (7)"]


def test_only_the_config_works_out_a_jobs_threads():
    """The threads a job's ranks get are worked out once (config.job_threads); every other module and
    rule asks for them."""
    derived = [
        f"{p.relative_to(ROOT)}:{i}"
        for p in _sources()
        if p.name != "config.py"
        for i, line in enumerate(p.read_text().splitlines(), 1)
        if re.search(r"max\((cfg\.)?threads\(", line)
    ]
    assert not derived, "threads per rank worked out outside config.py:\n" + "\n".join(derived)


def test_the_runtime_reads_a_jobs_settings_from_its_plan():
    """Every MPI job (run, calibration copy, sweep, replay) is made from one JobPlan (config.job_plan):
    no module of the package but the config asks for a job's threads, and the functions that make the
    job, its ranks' environment and its time limit take the plan, not a config."""
    asked = [
        f"{p.relative_to(ROOT)}:{i}"
        for p in _sources()
        if p.suffix == ".py" and p.name != "config.py"
        for i, line in enumerate(p.read_text().splitlines(), 1)
        if "job_threads(" in line
    ]
    assert not asked, "a job's threads asked outside its plan:\n" + "\n".join(asked)
    from dlscale.runtime import execution, launch

    for function in (execution.job, launch.rank_env, launch.measure):
        assert next(iter(inspect.signature(function).parameters)) == "job_plan", function


def test_no_line_is_kept_from_the_formatter():
    """The 50-line limit is met by functions that do one thing, not by lines squeezed past ruff."""
    marker = "# fmt: " + "skip"
    kept = [
        f"{p.relative_to(ROOT)}:{i}"
        for p in [*_sources(), *sorted((ROOT / "tests").glob("*.py"))]
        for i, line in enumerate(p.read_text().splitlines(), 1)
        if marker in line
    ]
    assert not kept, "lines the formatter is told to leave:\n" + "\n".join(kept)


def test_the_schema_takes_the_registered_frameworks_and_models():
    written = yaml.safe_load((PACKAGE / "workflow" / "config" / "schema.yaml").read_text())
    assert _enum(written, "framework") == [] and _enum(written, "model") == []  # no list to keep in step
    assert _enum(cfg.schema(), "framework") == list(frameworks.NAMES)
    assert _enum(cfg.schema(), "model") == list(MODELS)
    launcher = cfg.schema()["properties"]["launcher"]["properties"]["name"]["enum"]
    assert written["properties"]["launcher"]["properties"]["name"]["enum"] == [] and launcher == list(launchers.NAMES)


def _enum(schema, key):
    """The values the schema allows for `key` (a list of them, or one)."""
    spec = schema["properties"][key]
    for branch in spec.get("oneOf", spec.get("anyOf", [spec])):
        if "items" in branch:
            return branch["items"]["enum"]
    return spec["enum"]


TOY = '''"""A throwaway framework: its declarations only (tests/test_architecture.py)."""

NAME, LABEL, MODULES = "toy", "Toy", ("toy",)
LAYOUTS, BEST_LAYOUT, LAYOUT_NOTE = ("NCHW",), "NCHW", "a toy"
LIBRARIES, NATIVE, NOT_BUILT = ("native",), "its own", {"horovod": "a toy has none"}
LOADER, TRACE_RULES = "none", []


def trace_rest(event):
    return "compute"
'''
TOY_PINS = '''"""The toy's environment: its pins, and nothing Horovod's build would need."""

PINS = {"cpu": {"toy": "1.0"}, "cuda": {"toy": "1.0"}}
WORKLOAD_PINS, EXACT_CUDA_PINS, NCCL_WHEEL, HOROVOD_BUILD, CUDA_HEADERS = (), (), None, None, ()
INCLUDE_DIR, HOROVOD_INCLUDES, SITE_SHIM, DRIVER_LINKED = None, (), None, None
'''


def test_a_new_framework_is_its_package_and_one_registry_line(tmp_path):
    """Count what a fifth framework needs, by adding one to a copy of the package: its package (its
    declarations and its pins) and its word in the registry, and the config, the run matrix, the name
    search and the environments' recipe take it (training it needs the package's working modules too:
    docs/contributing.md)."""
    copy = tmp_path / "dlscale"
    shutil.copytree(PACKAGE, copy, ignore=shutil.ignore_patterns("__pycache__"))
    (copy / "workloads" / "frameworks" / "toy").mkdir()
    (copy / "workloads" / "frameworks" / "toy" / "__init__.py").write_text(TOY)
    (copy / "workloads" / "frameworks" / "toy" / "pins.py").write_text(TOY_PINS)
    registry = copy / "workloads" / "frameworks" / "__init__.py"
    names = "NAMES = (" + ", ".join(f'"{n}"' for n in frameworks.NAMES) + ")"
    assert names in registry.read_text()
    registry.write_text(registry.read_text().replace(names, names[:-1] + ', "toy")'))  # the one line
    code = (
        "import sys\n"  # the copy, not the checkout's editable install (a finder of its own)
        "sys.meta_path = [f for f in sys.meta_path if 'editable' not in repr(f)]\n"
        f"sys.path.insert(0, {str(tmp_path)!r})\n"
        "from dlscale.runtime import config as cfg\n"
        "conf = cfg.layered(items=['framework=[toy,torch]', 'repeats=1'])\n"
        "cfg.validate(conf)\n"
        "print(sorted({r['framework'] for r in cfg.matrix(conf)}))\n"
        "from dlscale.environment import recipe\n"
        "print(recipe.requirements('cpu', own='toy'))\n"
    )
    proc = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert proc.stdout.splitlines() == ["['torch', 'toy']", "['numpy==1.26.4', 'mpi4py==4.1.2', 'toy==1.0']"]
    changed = subprocess.run(
        ["diff", "-rq", "-x", "__pycache__", str(PACKAGE), str(copy)], capture_output=True, text=True
    )
    assert len(changed.stdout.splitlines()) == 2, changed.stdout  # the registry, and "Only in ...: toy"


def test_a_frameworks_pins_that_lack_a_declaration_are_named(monkeypatch):
    toy = SimpleNamespace(__file__="frameworks/toy/pins.py", PINS={"cpu": {}, "cuda": {}}, NCCL_WHEEL=None)
    monkeypatch.setattr(recipe.frameworks, "module", lambda name, part: toy)
    with pytest.raises(AttributeError, match=r"frameworks/toy/pins.py: declares no WORKLOAD_PINS, EXACT_CUDA_PINS, "):
        recipe.declared("toy")
    full = SimpleNamespace(**{key: () for key in recipe.DECLARED}, __file__="frameworks/toy/pins.py")
    full.PINS = {"cpu": {}}
    monkeypatch.setattr(recipe.frameworks, "module", lambda name, part: full)
    with pytest.raises(AttributeError, match=r"PINS for \('cpu', 'cuda'\)"):
        recipe.declared("toy")


def _typed_paths(path):
    """Results paths typed in `path`: a table's file name, or a string that starts a results path."""
    exact = {*paths.TABLES.values(), paths.REPLAY_PLANS}
    starts = (f"{paths.RUNS}/", f"{paths.ATTEMPTS}/", f"{paths.SWEEPS}/nodes", f"{paths.REPLAYS}/nodes")
    text = path.read_text()
    if path.suffix != ".py":
        return {w for w in exact if w in text} | {s for s in starts if f"/{s}" in text}
    return {
        node.value
        for node in ast.walk(ast.parse(text))
        if isinstance(node, ast.Constant) and isinstance(node.value, str)
        if node.value in exact or node.value.startswith(starts)
    }


def test_only_the_results_tree_spells_a_results_path():
    owner = PACKAGE / "core" / "paths.py"
    stray = [
        f"{path.relative_to(ROOT)}: {', '.join(sorted(found))}"
        for path in _sources()
        if path != owner and path.relative_to(ROOT).parts[0] != "bench"
        if (found := _typed_paths(path))
    ]
    assert not stray, "results paths typed outside dlscale/core/paths.py:\n" + "\n".join(stray)


def test_the_paths_search_finds_what_it_looks_for(tmp_path):
    (tmp_path / "a.py").write_text('x = "runs/torch"\ny = "summary.csv"\n')
    (tmp_path / "b.smk").write_text('rule r:\n    output: f"{RESULTS}/replay/nodes{{nodes}}.jsonl"\n')
    assert _typed_paths(tmp_path / "a.py") == {"runs/torch", "summary.csv"}
    assert _typed_paths(tmp_path / "b.smk") == {"replay/nodes"}


RULES = ROOT / "dlscale" / "workflow" / "rules"
# the one way a rule does its work (dlscale/runtime/rule.py `step`)
ONE_STYLE = "step(rule, {function}, input, output, params, log, resources)"


def adapter_misfits(text):
    """The run: blocks of a rule file that are not one `step` call in the one style, as their first line."""
    misfits = []
    for block in re.findall(r"^\s*run:\n((?:\s{8,}.*\n?)+)", text, re.M):
        call = " ".join(block.split())
        function = call.partition("step(rule, ")[2].partition(",")[0]
        if call != ONE_STYLE.format(function=function) or not function:
            misfits.append(block.strip().splitlines()[0])
    return misfits


def test_every_rule_hands_its_step_its_declared_lists_one_way():
    texts = {p.name: p.read_text() for p in RULES.glob("*.smk")}
    assert sum(t.count("run:") for t in texts.values()) >= 15
    assert {name: adapter_misfits(t) for name, t in texts.items() if adapter_misfits(t)} == {}


@pytest.mark.parametrize(
    "block",
    [
        "    run:\n        rule_process.run_rule(config, wildcards, input, output, log, params)\n",
        '    run:\n        step("tidy", steps.write_tables, list(input), output.tidy, log[0])\n',
        "    run:\n        step(rule, steps.write_model, input, output, config, log, resources)\n",
    ],
)
def test_the_adapter_test_fails_on_the_old_rules(block):
    assert adapter_misfits("rule x:\n    output:\n        'a'\n" + block)
