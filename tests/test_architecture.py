"""The import direction the architecture page describes: the runtime (harness, workloads) and the
environment builder sit below the analysis and never import from it; the analysis may import them."""

import ast

from tests.conftest import ROOT

BELOW = ("harness", "workloads", "environment")


def imported_modules(path):
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            yield from (alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
            yield node.module


def test_the_runtime_never_imports_the_analysis():
    upward = [
        f"{path.relative_to(ROOT)}: {name}"
        for folder in BELOW
        for path in sorted((ROOT / folder).rglob("*.py"))
        for name in imported_modules(path)
        if name == "analysis" or name.startswith("analysis.")
    ]
    assert not upward, "imports from analysis/ below it:\n" + "\n".join(upward)
