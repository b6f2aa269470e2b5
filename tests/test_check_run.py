"""check_run on hand-made record folders: each way a run can be wrong is caught."""

from harness import checks
from harness.records import PHASE_KEYS, Writer


def write_rank(run_dir, rank, steps=3, checksum=1.0, loss=2.0, end=True):
    w = Writer(run_dir / f"rank{rank}.jsonl")
    w.write("run", framework="torch", model="m", comm="overlap", layout="best", timing="phased", nodes=1, ranks_per_node=2,
            batch_size=4, loader_workers=0, image_size=64, classes=10, threads_per_rank=1, precision="fp32", repeat=0,
            rank=rank, size=2, local_rank=rank, host="h", provenance={})
    for it in range(steps):
        w.write("step", rank=rank, iteration=it, warmup=it == 0, profiled=False, wall_s=0.6, loss=loss,
                **{k: 0.1 for k in PHASE_KEYS})
    if end:
        w.write("end", rank=rank, iterations=steps, checksum=checksum, elapsed_s=1.0)
    w.close()


def test_good_run(tmp_path):
    write_rank(tmp_path, 0)
    write_rank(tmp_path, 1)
    assert checks.check_run(tmp_path, 2) == ([], [])


def test_each_problem_is_named(tmp_path):
    write_rank(tmp_path, 0, loss=float("nan"))
    write_rank(tmp_path, 1, checksum=1.5)
    write_rank(tmp_path, 2, end=False)
    with open(tmp_path / "rank2.jsonl", "a") as fh:
        fh.write("{broken\n")
    problems, errors = checks.check_run(tmp_path, 4)
    assert "rank 0: loss not finite at iterations [0, 1, 2]" in problems
    assert "rank 2 did not finish (no end record after 3 steps)" in problems
    assert "rank 3 wrote no records" in problems
    assert any(p.startswith("weights differ across ranks after training (ranks [1] vs rank 0)") for p in problems)
    assert errors == [f"{tmp_path}/rank2.jsonl:5: not valid JSON (Expecting property name enclosed in double quotes)"]


def test_a_native_run_without_a_rank_trace_is_caught(tmp_path):
    write_rank(tmp_path, 0)
    write_rank(tmp_path, 1)
    (tmp_path / "trace_rank0.json").write_text("{}")
    problems, _ = checks.check_run(tmp_path, 2, traced=True)
    assert problems == ["rank(s) [1] wrote no trace of the profiled iterations"]
