"""Benchmark record (not a test): where the README's test command spends its time, per test module, from a
JUnit XML report of one run of the suite (pytest --junitxml). CI's limit is 90 minutes and its target 45: this
says which modules to make cheaper. Appends one row per module (the run's commit and date on each), the
slowest first, and one row `(all)` with the whole run's total.

  .venv/bin/python bench/suite_durations.py REPORT.xml --commit C [--note TEXT]
      [--out bench/results/suite-durations.csv]
"""

import argparse
import datetime
import sys
import xml.etree.ElementTree as ET
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from bench.overhead import append_table, machine  # noqa: E402

COLUMNS = ["date", "commit", "module", "tests", "failed", "skipped", "seconds", "share", "slowest_test"]
COLUMNS += ["slowest_s", "note", "machine"]


def cases(report):
    """(module, test name, seconds, outcome) of each test case of a JUnit XML report; a bad report is named."""
    try:
        root = ET.parse(report).getroot()
    except (OSError, ET.ParseError) as exc:
        raise SystemExit(f"{report}: not a JUnit XML report ({exc})") from None
    out = []
    for case in root.iter("testcase"):
        module = case.get("classname", "").split(".")
        module = next((part for part in module if part.startswith("test_")), ".".join(module) or "?")
        outcome = "ok"
        if case.find("failure") is not None or case.find("error") is not None:
            outcome = "failed"
        elif case.find("skipped") is not None:
            outcome = "skipped"
        out.append((module, case.get("name", "?"), float(case.get("time", 0) or 0), outcome))
    if not out:
        raise SystemExit(f"{report}: no test cases in it")
    return out


def rows(found, stamp):
    """One row per module, the slowest first, and the whole run's `(all)` row."""
    total = sum(seconds for _, _, seconds, _ in found)
    by_module = {}
    for module, name, seconds, outcome in found:
        by_module.setdefault(module, []).append((name, seconds, outcome))
    out = []
    for module, tests in sorted(by_module.items(), key=lambda kv: -sum(s for _, s, _ in kv[1])):
        seconds = sum(s for _, s, _ in tests)
        slowest = max(tests, key=lambda t: t[1])
        out.append(
            {
                **stamp,
                "module": module,
                "tests": len(tests),
                "failed": sum(o == "failed" for *_, o in tests),
                "skipped": sum(o == "skipped" for *_, o in tests),
                "seconds": round(seconds, 1),
                "share": round(seconds / total, 3) if total else "",
                "slowest_test": slowest[0],
                "slowest_s": round(slowest[1], 1),
            }
        )
    every = {"tests": len(found), "seconds": round(total, 1), "share": 1.0}
    every |= {k: sum(r[k] for r in out) for k in ("failed", "skipped")}
    return out + [{**stamp, "module": "(all)", **every}]


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("report")
    ap.add_argument("--commit", required=True)
    ap.add_argument("--note", default="")
    ap.add_argument("--out", default=str(ROOT / "bench" / "results" / "suite-durations.csv"))
    args = ap.parse_args()
    stamp = {"date": datetime.date.today().isoformat(), "commit": args.commit, "note": args.note}
    made = rows(cases(args.report), stamp | {"machine": machine()})
    for r in made:
        print(f"{r['module']:32} {r['tests']:4} tests {r['seconds']:8.1f} s")
    append_table(made, args.out, COLUMNS)


if __name__ == "__main__":
    main()
