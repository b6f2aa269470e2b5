"""bench/suite_durations.py: a JUnit XML report of the suite read into per-module seconds, the slowest
first, with the run's total; a report that is not one is named."""

import pytest

from bench import suite_durations

REPORT = """<?xml version="1.0" encoding="utf-8"?>
<testsuites><testsuite name="pytest" tests="4">
<testcase classname="tests.test_pipeline" name="test_a" time="120.5"/>
<testcase classname="tests.test_pipeline" name="test_b" time="30.0"><failure message="x"/></testcase>
<testcase classname="tests.test_model" name="test_c" time="0.5"/>
<testcase classname="tests.test_gpu" name="test_d" time="0.01"><skipped message="no GPU"/></testcase>
</testsuite></testsuites>
"""


def test_a_report_is_read_into_modules_slowest_first_with_the_total(tmp_path):
    path = tmp_path / "report.xml"
    path.write_text(REPORT)
    rows = suite_durations.rows(suite_durations.cases(path), {"commit": "abc"})
    assert [r["module"] for r in rows] == ["test_pipeline", "test_model", "test_gpu", "(all)"]
    pipeline, *_, every = rows
    assert (pipeline["tests"], pipeline["failed"], pipeline["seconds"]) == (2, 1, 150.5)
    assert (pipeline["slowest_test"], pipeline["slowest_s"]) == ("test_a", 120.5)
    assert rows[2]["skipped"] == 1
    assert (every["tests"], every["failed"], every["skipped"], every["seconds"]) == (4, 1, 1, 151.0)
    assert pipeline["share"] == pytest.approx(150.5 / 151.0, abs=1e-3)


@pytest.mark.parametrize("text", ["not xml", "<testsuites></testsuites>"])
def test_a_report_that_is_not_one_is_named(tmp_path, text):
    path = tmp_path / "report.xml"
    path.write_text(text)
    with pytest.raises(SystemExit, match="report.xml"):
        suite_durations.cases(path)


def test_the_documented_command_appends_the_rows(tmp_path):
    import csv
    import subprocess
    import sys

    from tests.conftest import ROOT

    (tmp_path / "report.xml").write_text(REPORT)
    out = tmp_path / "durations.csv"
    script = [sys.executable, str(ROOT / "bench" / "suite_durations.py"), str(tmp_path / "report.xml")]
    for _ in range(2):  # a second run keeps the first's rows
        proc = subprocess.run([*script, "--commit", "abc", "--out", str(out)], capture_output=True, text=True)
        assert proc.returncode == 0, proc.stderr
    assert [r["module"] for r in csv.DictReader(out.open())] == ["test_pipeline", "test_model", "test_gpu", "(all)"] * 2
