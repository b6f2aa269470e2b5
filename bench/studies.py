"""What the benchmarks that read finished studies' tables share (bench/drift.py, bench/iterations.py): their
command line (results folders, a name, a note, the machine) and their table, whose other studies' rows are kept."""

import argparse
from pathlib import Path

import pandas as pd

from bench.overhead import machine


def arguments(doc, out, argv=None):
    """The parsed command line of a benchmark described by `doc` writing `out` by default."""
    parser = argparse.ArgumentParser(description=doc.split("\n\n")[0])
    parser.add_argument("results", nargs="+", type=Path)
    parser.add_argument("--note", default="")
    parser.add_argument("--machine", default=machine(), help="where the studies ran (default: this machine)")
    parser.add_argument("--name", help="the study's name in the table (one RESULTS only; default: its path)")
    parser.add_argument("--out", type=Path, default=out)
    args = parser.parse_args(argv)
    if args.name and len(args.results) > 1:
        parser.error("--name names one study: give one RESULTS")
    return args


def write(made, out):
    """`made` written to `out` after the rows there of other studies (a study's own rows replaced)."""
    if out.is_file():
        old = pd.read_csv(out, keep_default_na=False, dtype=str)
        made = pd.concat([old[~old["study"].isin(made["study"])], made.astype(str)])
    made.to_csv(out, index=False)
    print(f"wrote {out}")
