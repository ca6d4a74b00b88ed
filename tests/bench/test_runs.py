"""Run directories: layout, JSON and Parquet round trips, DuckDB views, interrupted writers."""

from __future__ import annotations

import pyarrow as pa
import pytest
from pydantic import BaseModel

from switchover.errors import BadInput
from switchover.runs import RunDir


class Thing(BaseModel):
    a: int
    b: str


def test_create_names_by_utc_time_and_keeps_same_second_runs_apart(tmp_path):
    a = RunDir.create(tmp_path, "my bench", now=0)
    b = RunDir.create(tmp_path, "my bench", now=0)
    assert a.name == "19700101T000000Z-my-bench"
    assert b.name == "19700101T000000Z-my-bench-1"
    assert RunDir.latest(tmp_path).name == b.name


def test_json_round_trip_typed_and_plain(tmp_path):
    rd = RunDir.create(tmp_path, "x")
    rd.write_json("summary", Thing(a=1, b="z"))
    rd.write_json("plain", {"k": [1, 2]})
    assert rd.read_json("summary", Thing) == Thing(a=1, b="z")
    assert rd.read_json("plain.json") == {"k": [1, 2]}
    assert rd.files() == ["plain.json", "summary.json"]


def test_records_round_trip_and_query(tmp_path):
    rd = RunDir.create(tmp_path, "x")
    rd.write_records("requests", [{"e": "old", "v": 1.0, "xs": [1, 2]}, {"e": "new", "v": 3.0, "xs": []}])
    assert rd.read_records("requests")[1] == {"e": "new", "v": 3.0, "xs": []}
    assert rd.query("select e, v from requests where v > 2") == [{"e": "new", "v": 3.0}]


def test_record_writer_keeps_rows_of_each_append_and_an_empty_file_has_the_schema(tmp_path):
    rd = RunDir.create(tmp_path, "x")
    schema = pa.schema([("i", pa.int32()), ("s", pa.string())])
    w = rd.record_writer("requests", schema)
    w.append([{"i": 1, "s": None}])
    w.append([{"i": 2, "s": "b"}])
    w.close()
    assert [r["i"] for r in rd.read_records("requests")] == [1, 2]
    with rd.record_writer("empty", schema):
        pass
    assert rd.read_records("empty") == []


def test_missing_things_are_bad_input(tmp_path):
    with pytest.raises(BadInput, match="no such run directory"):
        RunDir.open(tmp_path / "nope")
    rd = RunDir.create(tmp_path, "x")
    with pytest.raises(BadInput, match="missing"):
        rd.read_json("summary")
    with pytest.raises(BadInput, match="plain file name"):
        rd.write_json("../escape", {})
