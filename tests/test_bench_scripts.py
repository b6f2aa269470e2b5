"""The benchmark scripts that time training through the harness, run shrunk (tinynet, few iterations,
one trial): they build their spec on bench/overhead.py's `harness_spec`, and a spec the harness no
longer takes (a key it came to need) fails here, not when someone next measures."""

import csv
import subprocess
import sys

from tests.conftest import ROOT

SHRUNK = ["--framework", "torch", "--model", "tinynet", "--trials", "1", "--iterations", "3", "--warmup", "1"]


def _run(script, out):
    proc = subprocess.run(
        [sys.executable, str(ROOT / "bench" / script), *SHRUNK, "--out", str(out)],
        capture_output=True,
        text=True,
        timeout=900,
    )
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-2000:]
    return list(csv.DictReader(out.open()))


def test_the_layout_benchmark_times_every_layout_against_the_best(tmp_path):
    rows = _run("layout.py", tmp_path / "layout.csv")
    assert sorted(r["layout"] for r in rows) == ["NCHW", "NHWC"]
    assert all(float(r["img_per_s"]) > 0 for r in rows)


def test_the_contention_benchmark_times_a_pair_and_two_ranks_against_one_alone(tmp_path):
    rows = _run("contention.py", tmp_path / "contention.csv")
    assert sorted(r["kind"] for r in rows) == ["pair", "ranks2"]
    assert all(float(r["ratio_to_alone"]) > 0 for r in rows)
