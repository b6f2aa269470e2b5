import json

from dlscale.core import records


def step(**over):
    rec = {
        "schema": records.SCHEMA,
        "kind": "step",
        "rank": 0,
        "iteration": 0,
        "warmup": False,
        "profiled": False,
        "wall_s": 0.6,
        "loss": 6.9,
        **{k: 0.1 for k in records.PHASE_KEYS},
    }
    rec.update(over)
    return json.dumps(rec)


def test_writer_and_parser_round_trip(tmp_path):
    path = tmp_path / "rank0.jsonl"
    w = records.Writer(path)
    w.write(
        "step",
        rank=0,
        iteration=3,
        warmup=True,
        profiled=False,
        wall_s=0.5,
        loss=1.0,
        **{k: 0.05 for k in records.PHASE_KEYS},
    )
    w.write("end", rank=0, iterations=4, checksum=1.5, elapsed_s=2.0)
    w.close()
    recs, errors = records.parse_file(path)
    assert errors == []
    assert [r["kind"] for r in recs] == ["step", "end"]
    assert recs[0]["iteration"] == 3 and recs[0]["warmup"] is True


def test_malformed_line_reported_with_file_and_line(tmp_path):
    path = tmp_path / "rank1.jsonl"
    path.write_text("\n".join([step(), '{"schema": "dlscale.record/1", "kind": "step", "rank"', step(iteration=1)]))
    recs, errors = records.parse_file(path)
    assert len(recs) == 2
    assert errors == [f"{path}:2: not valid JSON (Expecting ':' delimiter)"]


def test_missing_phase_and_bad_values():
    partial = json.loads(step())
    del partial["comm_s"]
    lines = [
        step(comm_s=None),
        json.dumps({"schema": records.SCHEMA, "kind": "step", "rank": 0}),
        step(forward_s=-1.0),
        json.dumps({"schema": "other/9", "kind": "step"}),
        json.dumps({"schema": records.SCHEMA, "kind": "lap"}),
        "[1, 2]",
        json.dumps(partial),
    ]
    recs, errors = records.parse_lines(lines, source="f")
    assert recs == []
    assert errors[0] == "f:1: comm_s is None, expected a finite non-negative number of seconds"
    assert errors[1] == "f:2: step record lacks iteration, warmup, profiled, wall_s, loss"
    assert errors[2].startswith("f:3: forward_s is -1.0")
    assert errors[3] == "f:4: schema is 'other/9', expected 'dlscale.record/4'"
    assert errors[4].startswith("f:5: unknown kind 'lap'")
    assert errors[5] == "f:6: not a JSON object"
    assert errors[6].startswith("f:7: step record has io_s, h2d_s, forward_s, backward_s, update_s but lacks comm_s")


def test_native_step_record_has_wall_time_only():
    rec = json.loads(step())
    for key in records.PHASE_KEYS:
        del rec[key]
    recs, errors = records.parse_lines([json.dumps(rec)])
    assert errors == [] and recs[0]["wall_s"] == 0.6


def test_a_record_of_the_schema_before_is_read_under_todays_names():
    """A run record of dlscale.record/3 (before 0.3.0) parses as the current schema, its `comm` and
    `comm_library` under their new names, so an older study's runs can be analysed again; any other
    schema is still refused."""
    identity = {k: 1 for k in records.IDENTITY if k not in ("allreduce_schedule", "allreduce_library")}
    old = {"schema": records.OLDER, "kind": "run", **identity, "comm": "overlap", "comm_library": "horovod"}
    old |= {"rank": 0, "size": 1, "local_rank": 0, "host": "h", "provenance": {}}
    recs, errors = records.parse_lines([json.dumps(old), step(schema="dlscale.record/2")])
    assert errors == ["<records>:2: schema is 'dlscale.record/2', expected 'dlscale.record/4'"]
    assert recs[0]["schema"] == records.SCHEMA
    assert (recs[0]["allreduce_schedule"], recs[0]["allreduce_library"]) == ("overlap", "horovod")
    assert "comm" not in recs[0] and "comm_library" not in recs[0]
