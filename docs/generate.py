"""The generated parts of the docs, each from the one source it describes, committed in the pages
themselves between its marker and an end marker (so a reader on GitHub sees them), kept equal to
what this module makes by a test (tests/test_docs.py) and rewritten by `python -m docs.generate`:

  <!-- generated: config -->     config/schema.yaml's descriptions, with config/config.yaml's defaults
  <!-- generated: outputs -->    what lands where (dlscale/analysis/columns.py OUTPUTS)
  <!-- generated: columns -->    every table's columns, in the code's order, with dlscale/analysis/columns.py's words
  <!-- generated: cli -->        the help of the command line's argparse parser and of each subcommand
  <!-- generated: captions -->   the figures' captions (dlscale/workflow/report/*.rst, also snakemake --report's)
  <!-- table: bench/results/X.csv -->   a committed measurement, with its date, machine and command
                                       (bench/results/X.meta.yaml)

Each block is `<!-- KIND: WHAT -->`, the generated text, `<!-- end KIND: WHAT -->`; a marker without
its end gets one. docs/hooks.py calls `render` on every page (MkDocs' on_page_markdown), which the
committed text already equals; the tests call these functions directly. An unknown placeholder is an
error, so a typo fails `mkdocs build`."""

import argparse
import csv
import os
import re
from pathlib import Path

import yaml

from dlscale.runtime import config as cfg

ROOT = Path(__file__).resolve().parent.parent
# a marker, then (where it was rendered before) the text it made and its end marker
PLACEHOLDER = re.compile(r"<!--\s*(generated|table):\s*(\S+)\s*-->(?:\n\n.*?\n\n<!-- end \1: \2 -->)?", re.S)


# --- the config ---------------------------------------------------------------------------------


def schema_keys(node, prefix=""):
    """(dotted key, schema node) of every key of the schema, nested ones included; the values of an
    open mapping (`additionalProperties` with properties of its own) appear as `<name>`."""
    out = []
    for key, sub in (node.get("properties") or {}).items():
        name = f"{prefix}{key}"
        out.append((name, sub))
        out += schema_keys(sub, f"{name}.")
        extra = sub.get("additionalProperties")
        if isinstance(extra, dict) and extra.get("properties"):
            out += schema_keys(extra, f"{name}.<name>.")
    return out


def _kind(node):
    if "enum" in node:
        return " | ".join(f"`{v}`" for v in node["enum"])
    kind = node.get("type", "")
    if kind == "array":
        items = node.get("items", {})
        inner = _kind(items) if items else ""
        return f"list of {inner}" if inner else "list"
    return " or ".join(kind) if isinstance(kind, list) else kind


def _default(config, dotted):
    value = config
    for part in dotted.split("."):
        if not isinstance(value, dict) or part not in value:
            return "(absent)"
        value = value[part]
    text = yaml.safe_dump(value, default_flow_style=True, width=10**6).strip()
    text = text.removesuffix("...").strip()
    return f"`{text}`" if len(text) < 60 else "see `config/config.yaml`"


def _cell(text):
    """A table cell: one line, `|` escaped, and `<` `>` outside code spans written as entities (Markdown
    would take `<path>` for an HTML tag and drop it)."""
    parts = " ".join(str(text).split()).replace("|", "\\|").split("`")
    return "`".join(p if i % 2 else p.replace("<", "&lt;").replace(">", "&gt;") for i, p in enumerate(parts))


def config_reference(schema_path=None, config_path=ROOT / "config" / "config.yaml"):
    """The config reference's table: the schema as the runtime reads it (its enumerations the
    registries'), or the schema file `schema_path` as it stands."""
    schema = cfg.schema() if schema_path is None else yaml.safe_load(Path(schema_path).read_text())
    config = yaml.safe_load(Path(config_path).read_text())
    required = set(schema.get("required", []))
    lines = ["| key | values | default | meaning |", "| --- | --- | --- | --- |"]
    for key, node in schema_keys(schema):
        top = key.split(".")[0]
        need = "" if "." in key or top in required else " (optional)"
        lines.append(
            f"| `{key}`{need} | {_cell(_kind(node))} | {_cell(_default(config, key))} | "
            f"{_cell(node.get('description', ''))} |"
        )
    return "\n".join(lines)


# --- outputs and columns ------------------------------------------------------------------------


def code_columns():
    """{table: its column list as the code declares it}, for the tables whose writer has one."""
    from dlscale.analysis import comm, comparisons, metrics, prediction, replayed, tidy
    from dlscale.core.paths import TABLES
    from dlscale.runtime import design
    from dlscale.workloads import flops

    return {
        TABLES["tidy"]: list(tidy.TIDY_COLUMNS),
        TABLES["runs"]: list(tidy.RUNS_COLUMNS),
        TABLES["tensors"]: list(tidy.TENSOR_COLUMNS),
        TABLES["run_metrics"]: list(metrics.RUN_METRICS_COLUMNS),
        TABLES["comparisons"]: list(comparisons.COLUMNS),
        TABLES["order"]: list(design.COLUMNS),
        TABLES["flops"]: list(flops.COLUMNS),
        TABLES["allreduce"]: list(comm.SWEEP_COLUMNS),
        TABLES["allreduce_fit"]: list(comm.FIT_COLUMNS),
        TABLES["model"]: list(prediction.COLUMNS),
        TABLES["replayed"]: list(replayed.MEASURED_COLUMNS),
        TABLES["replay"]: list(replayed.REPLAY_COLUMNS),
    }


def outputs_reference():
    from dlscale.analysis.columns import OUTPUTS

    lines = ["| path | what |", "| --- | --- |"]
    for path, what in OUTPUTS.items():
        shown = ", ".join(f"`{p.strip()}`" for p in path.split(","))
        lines.append(f"| {shown} | {_cell(what)} |")
    return "\n".join(lines)


def columns_reference():
    from dlscale.analysis.columns import JSON_KEYS, OUTPUTS, TABLES

    declared = code_columns()
    parts = []
    for table, described in TABLES.items():
        order = declared.get(table, [])
        names = order + [c for c in described if c not in order]
        parts += [f"### {table}", "", _cell(OUTPUTS.get(table, "")), "", "| column | meaning |", "| --- | --- |"]
        parts += [f"| `{c}` | {_cell(described.get(c, '**not described**'))} |" for c in names]
        parts.append("")
    for name, keys in JSON_KEYS.items():
        parts += [f"### {name}", "", _cell(OUTPUTS.get(name, "")), "", "| key | meaning |", "| --- | --- |"]
        parts += [f"| `{k}` | {_cell(v)} |" for k, v in keys.items()]
        parts.append("")
    return "\n".join(parts)


# --- the command line ---------------------------------------------------------------------------


def _help(parser):
    old = os.environ.get("COLUMNS")
    os.environ["COLUMNS"] = "100"
    try:
        return parser.format_help()
    finally:
        if old is None:
            os.environ.pop("COLUMNS")
        else:
            os.environ["COLUMNS"] = old


def cli_reference(parser=None):
    if parser is None:
        from dlscale.cli import parser as make

        parser = make()
    parts = [f"## `{parser.prog}`", "", "```text", _help(parser).rstrip(), "```", ""]
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for sub in action.choices.values():
                parts += [f"### `{sub.prog}`", "", "```text", _help(sub).rstrip(), "```", ""]
    return "\n".join(parts)


# --- captions -----------------------------------------------------------------------------------


def captions(folder=ROOT / "dlscale" / "workflow" / "report"):
    """The figures' captions in the order a report shows the figures, then the other captions."""
    from dlscale.core.paths import FIGURE_NAMES, MODEL_FIGURE_NAMES

    rank = {name: i for i, name in enumerate(FIGURE_NAMES + MODEL_FIGURE_NAMES)}
    parts = []
    for path in sorted(Path(folder).glob("*.rst"), key=lambda p: (rank.get(p.stem, len(rank)), p.stem)):
        text = " ".join(path.read_text().split()).replace("``", "`")
        parts += [f"**{path.stem}**: {text}", ""]
    return "\n".join(parts)


# --- measurements -------------------------------------------------------------------------------


def sidecar(csv_path):
    return Path(csv_path).with_suffix(".meta.yaml")


WIDE = 12  # columns beyond which a table of fewer rows than columns is shown transposed


def measurement(csv_path):
    """A committed CSV as a Markdown table, headed by its sidecar's what, date, machine and command."""
    path = ROOT / csv_path if not Path(csv_path).is_absolute() else Path(csv_path)
    meta = yaml.safe_load(sidecar(path).read_text())
    with open(path, newline="") as fh:
        rows = list(csv.DictReader(fh))
    machines = sorted({r.get("machine", "") for r in rows} - {""})
    columns = [c for c in rows[0] if c != "machine"] if rows else []
    head = [
        f"`{Path(csv_path).as_posix()}`: {meta['what']}",
        "",
        f"- date: {meta['date']}",
        f"- machine: {'; '.join(machines) or 'not recorded'}",
        "- command:",
        "",
        "```text",
        str(meta["command"]).strip(),
        "```",
        "",
    ]
    if len(columns) > WIDE and len(rows) < len(columns):  # a wide table of few rows reads down the page
        table = ["| column | " + " | ".join(f"row {i + 1}" for i in range(len(rows))) + " |"]
        table += ["|" + " --- |" * (len(rows) + 1)]
        table += ["| " + " | ".join([c] + [_cell(r[c]) for r in rows]) + " |" for c in columns]
    else:
        table = ["| " + " | ".join(columns) + " |", "|" + " --- |" * len(columns)]
        table += ["| " + " | ".join(_cell(r[c]) for c in columns) + " |" for r in rows]
    return "\n".join(head + table)


# --- the hook's entry ---------------------------------------------------------------------------

GENERATED = {
    "config": config_reference,
    "outputs": outputs_reference,
    "columns": columns_reference,
    "cli": cli_reference,
    "captions": captions,
}


def render(markdown):
    """`markdown` with every block's text made again from its source."""

    def replace(match):
        kind, what = match.groups()
        if kind == "table":
            text = measurement(what)
        elif what not in GENERATED:
            raise ValueError(f"unknown placeholder <!-- generated: {what} -->; known: {', '.join(GENERATED)}")
        else:
            text = GENERATED[what]()
        # blank lines around the text: Markdown reads a comment's line as raw HTML up to a blank line
        return f"<!-- {kind}: {what} -->\n\n{text.strip(chr(10))}\n\n<!-- end {kind}: {what} -->"

    return PLACEHOLDER.sub(replace, markdown)


def pages():
    """Every page that may hold a block: README.md and docs/."""
    return [ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md"))]


def main(argv=None):
    """Rewrite every page's blocks from their sources; with --check, say which pages differ and fail."""
    parser = argparse.ArgumentParser(description=main.__doc__)
    parser.add_argument("--check", action="store_true", help="change nothing; exit 1 where a page differs")
    args = parser.parse_args(argv)
    stale = []
    for page in pages():
        text = page.read_text()
        made = render(text)
        if made != text:
            stale.append(page.relative_to(ROOT))
            if not args.check:
                page.write_text(made)
    verb = "differ from their sources (run python -m docs.generate)" if args.check else "rewritten"
    print(f"{len(stale)} page(s) {verb}" + "".join(f"\n  {p}" for p in stale))
    return 1 if stale and args.check else 0


if __name__ == "__main__":
    raise SystemExit(main())
