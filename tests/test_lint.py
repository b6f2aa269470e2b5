"""Lint and format, as CI checks them: ruff (lint and format) for the Python, snakefmt for the
Snakefile and rules, and Snakemake's own linter for the workflow. Settings: pyproject.toml."""

import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import ROOT

BIN = Path(sys.executable).parent
WORKFLOW = ["Snakefile", "dlscale/workflow/Snakefile", "dlscale/workflow/rules/"]


@pytest.mark.parametrize(
    "argv",
    [["ruff", "check", "."], ["ruff", "format", "--check", "."], ["snakefmt", "--check", *WORKFLOW]],
    ids=["ruff", "ruff-format", "snakefmt"],
)
def test_the_code_is_linted_and_formatted(argv):
    proc = subprocess.run([str(BIN / argv[0]), *argv[1:]], cwd=ROOT, capture_output=True, text=True)
    assert proc.returncode == 0, f"{' '.join(argv)}:\n{proc.stdout[-4000:]}\n{proc.stderr[-2000:]}"


def test_snakemake_lint_is_clean():
    proc = subprocess.run([sys.executable, "-m", "snakemake", "--lint"], cwd=ROOT, capture_output=True, text=True)
    assert (
        proc.returncode == 0 and "Congratulations, your workflow is in a good condition!" in proc.stdout + proc.stderr
    ), proc.stdout[-4000:]
