"""The docs: the MkDocs site builds strictly, the README stays a front door, and the generated
references cover what they describe: every config key has a description in config/schema.yaml,
every column of every table a study writes has one in dlscale/analysis/columns.py, and every committed
benchmark table has its sidecar (date, command, what)."""

import fnmatch
import json
import re
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest
import yaml

from dlscale.analysis import columns
from dlscale.core import paths
from dlscale.runtime import config as cfg
from docs import generate
from tests.conftest import ROOT
from tests.study import run_shrunk


def test_site_builds_strictly(tmp_path):
    proc = subprocess.run(
        [sys.executable, "-m", "mkdocs", "build", "--strict", "-d", str(tmp_path / "site")],
        cwd=ROOT,
        capture_output=True,
        text=True,
    )
    assert proc.returncode == 0, proc.stderr[-4000:]
    page = (tmp_path / "site" / "reference" / "outputs" / "index.html").read_text()
    # the generated blocks' Markdown rendered (their markers stay, as comments)
    assert "<td><code>loader_utilisation</code></td>" in page or "<td>loader_utilisation</td>" in page


def test_readme_is_a_front_door():
    text = (ROOT / "README.md").read_text()
    assert len(text.splitlines()) <= 200
    for command in (
        "./bootstrap.sh && .venv/bin/snakemake --cores all",
        "./bootstrap.sh --dev && .venv/bin/python -m pytest",
    ):
        assert f"```sh\n{command}\n```" in text


def test_readme_layout_table_names_the_results_tree():
    """Every file the README's "What lands where" table names is one the results tree has
    (dlscale/core/paths.py), and every table is in it."""
    text = (ROOT / "README.md").read_text().split("## What lands where")[1].split("\n## ")[0]
    named = set(re.findall(r"`(?:results/)?([a-z_*]+\.(?:csv|json|md))`", text))
    known = set(paths.TABLES.values())
    assert all(any(fnmatch.fnmatch(t, n) for t in known) for n in named), named
    globbed = {t for t in known if any(fnmatch.fnmatch(t, n) for n in named)}
    assert globbed == known, known - globbed


def test_every_generated_block_is_committed_as_its_source_makes_it():
    """The pages hold their generated parts (readable on GitHub); a source changed without
    `python -m docs.generate` fails here, naming the page."""
    stale = [str(p.relative_to(ROOT)) for p in generate.pages() if generate.render(p.read_text()) != p.read_text()]
    assert not stale, f"run .venv/bin/python -m docs.generate: {stale}"
    marked = [p for p in generate.pages() if generate.PLACEHOLDER.search(p.read_text())]
    assert all("<!-- end " in p.read_text() for p in marked)
    # a block rendered once is the same rendered again; an unrendered marker gets its end
    once = generate.render("a\n<!-- generated: captions -->\nb")
    assert generate.render(once) == once and once.endswith("<!-- end generated: captions -->\nb")


def test_readme_names_the_figures_a_default_study_draws():
    """The figures row of "What lands where" lists what the default study draws (replay: where a
    study replays, which the default does not), in the figures' own order."""
    readme = (ROOT / "README.md").read_text().splitlines()
    row = next(line for line in readme if line.startswith("| `results/figures/`"))
    named = re.findall(r"[a-z]+", row.split("|")[2].split("(PDF")[0].replace("where the study replays", ""))
    default = yaml.safe_load((ROOT / "config" / "config.yaml").read_text())
    drawn = list(paths.FIGURE_NAMES) + list(paths.model_figures(bool(default.get("replay"))))
    assert [n for n in named if n != "and"] == drawn + ["replay"]
    assert "replay" not in drawn  # the default study replays nothing: the README says so


def test_every_schema_key_has_a_description():
    schema = cfg.schema()
    keys = generate.schema_keys(schema)
    assert {
        "framework",
        "data.kind",
        "emulate.congestion_control",
        "extrapolate.links.<name>.gbit_s",
        "launcher.env",
    } <= {k for k, _ in keys}
    missing = [k for k, node in keys if not str(node.get("description", "")).strip()]
    assert not missing, f"config/schema.yaml: give these keys a description: {missing}"


def test_config_reference_has_every_key_with_its_default():
    text = generate.config_reference()
    assert "| `repeats` | integer | `3` |" in text
    assert "`emulate.rate_mbit`" in text and "(absent)" in text


def _undescribed(table, names):
    described = columns.TABLES[table]
    return [c for c in names if not str(described.get(c, "")).strip()]


def test_every_declared_column_has_a_description():
    """The tables whose writers declare their columns (dlscale/analysis/tidy.py, comm.py, model.py)."""
    declared = generate.code_columns()
    missing = {t: _undescribed(t, names) for t, names in declared.items()}
    assert not any(missing.values()), f"dlscale/analysis/columns.py: describe {missing}"
    stale = {
        t: sorted(set(columns.TABLES[t]) - set(names) - {"loader_img_per_s", "timeline_comm_s", "timeline_ops"})
        for t, names in declared.items()
    }
    assert not any(stale.values()), f"dlscale/analysis/columns.py describes columns no table has: {stale}"


@pytest.fixture(scope="module")
def tiny_study(tmp_path_factory):
    """A real study, small: the default config with PyTorch alone, shrunk (tests/study.py)."""
    folder = tmp_path_factory.mktemp("docs-study")
    overlay = folder / "torch.yaml"
    # with a second pass (off in the default study), whose table is one the study writes
    second = {"target": 0.05, "max_repeats": 2, "max_seconds": 60}
    overlay.write_text(yaml.safe_dump({"framework": ["torch"], "timing": ["native", "phased"], "second_pass": second}))
    proc, conf = run_shrunk(["config/config.yaml", overlay], folder)
    assert proc.returncode == 0, proc.stderr[-4000:]
    return Path(conf["results"])


def _keys(value, prefix=""):
    out = []
    for key, sub in value.items():
        out.append(f"{prefix}{key}")
        if isinstance(sub, dict) and key == "replay":
            out += _keys(sub, f"{key}.")
    return out


@pytest.mark.timeout(1200)
def test_every_column_a_study_writes_has_a_description(tiny_study):
    written = sorted(p.name for p in tiny_study.glob("*.csv"))
    assert written == sorted(columns.TABLES), (
        "a table the pipeline writes is missing from dlscale/analysis/columns.py TABLES"
    )
    missing = {}
    for name in written:
        names = list(pd.read_csv(tiny_study / name, nrows=0).columns)
        missing[name] = _undescribed(name, names)
    error = json.loads((tiny_study / "model_error.json").read_text())
    missing["model_error.json"] = [k for k in _keys(error) if k not in columns.JSON_KEYS["model_error.json"]]
    assert not any(missing.values()), f"dlscale/analysis/columns.py: describe {missing}"


def test_every_bench_table_has_its_sidecar():
    tables = sorted((ROOT / "bench" / "results").glob("*.csv"))
    assert tables
    for path in tables:
        side = generate.sidecar(path)
        assert side.is_file(), f"{path.name} has no {side.name} (date, command, what)"
        meta = yaml.safe_load(side.read_text())
        assert {"date", "command", "what"} <= set(meta), side.name
        assert str(meta["command"]).split()[0] in (".venv/bin/python", "python3"), side.name
        text = generate.measurement(path.relative_to(ROOT))
        assert str(meta["date"]) in text
    page = (ROOT / "docs" / "measurements.md").read_text()
    unrendered = [p.name for p in tables if f"<!-- table: bench/results/{p.name} -->" not in page]
    assert not unrendered, f"docs/measurements.md does not render {unrendered}"


def test_cli_reference_is_the_parser_s_own_help():
    from dlscale.cli import parser

    text = generate.cli_reference()
    assert text.startswith("## `dlscale`") and parser().format_help().splitlines()[0] in text
    for sub in ("run", "report", "env", "launch", "retry", "unlock", "check-config", "emulate"):
        assert f"### `dlscale {sub}`" in text


def test_an_unknown_placeholder_fails_the_build():
    with pytest.raises(ValueError, match="unknown placeholder"):
        generate.render("<!-- generated: nothing -->")
