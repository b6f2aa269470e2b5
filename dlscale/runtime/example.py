"""The docs' example study (docs/example/): a finished study's report, figures and main tables, copied. A test
checks it has a fresh report's form (sections and files), not its numbers: a changed report shows as stale."""

import re
import shutil
from pathlib import Path

from dlscale.core.paths import FIGURES, TABLES

# The report's main tables, and those `dlscale compare` and `dlscale plan` read (a user's machine beside it).
TABLES_KEPT = ("summary", "comparisons", "blocks", "order")
TABLES_READ = ("runs", "run_metrics", "tensors", "allreduce", "allreduce_fit", "model", "contention")
HEADER = (
    '!!! note "An example, not a result to cite"\n'
    "    The report of the default study (`config/config.yaml`) as it ran on one of this project's\n"
    "    machines; its commit, dates and hardware are below. Made by `dlscale example results docs/example`.\n"
    "    [What has run where](../limits.md).\n\n"
)


def publish(results, out):
    """Copy `results`' report, PNG figures and main tables into `out` (replacing an earlier example)."""
    results, out = Path(results), Path(out)
    report = results / TABLES["report"]
    if not report.is_file():
        raise ValueError(f"{report}: no report (run the study first: snakemake --cores all)")
    if out.exists():
        shutil.rmtree(out)
    (out / FIGURES).mkdir(parents=True)
    (out / TABLES["report"]).write_text(HEADER + report.read_text())
    for png in sorted((results / FIGURES).glob("*.png")):
        shutil.copy(png, out / FIGURES / png.name)
    for name in TABLES_KEPT + TABLES_READ:
        if (results / TABLES[name]).is_file():
            shutil.copy(results / TABLES[name], out / TABLES[name])
    return sorted(p for p in out.rglob("*") if p.is_file())


def form(report_text, figures):
    """What an example's form is: the report's section headings (numbers stripped) and its figures."""
    sections = [re.sub(r"\(.*\)", "", line).strip() for line in report_text.splitlines() if line.startswith("## ")]
    return sections, sorted(Path(f).name for f in figures)


def form_of(folder):
    """The form of a published example (`publish`'s folder)."""
    folder = Path(folder)
    return form((folder / TABLES["report"]).read_text(), (folder / FIGURES).glob("*.png"))
