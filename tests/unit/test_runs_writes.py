"""Run directories: JSON and Parquet are written whole under unique temporary names, with secrets masked."""

from __future__ import annotations

from pathlib import Path

import pyarrow as pa
import pytest

from switchover.atomicfile import is_temp
from switchover.errors import BadInput
from switchover.runs import RunDir, prepare_folder

SCHEMA = pa.schema([("endpoint", pa.string()), ("error", pa.string()), ("n", pa.int64())])


def test_json_is_written_whole_and_masked(tmp_path: Path) -> None:
    rd = RunDir.create(tmp_path, "t")
    rd.write_json("config", {"url": "http://u:hunter22@h:1", "api_key": "k", "cmd": "curl -u a:b2 x", "n": 1})
    text = (rd.path / "config.json").read_text()
    assert "hunter22" not in text and '"api_key": "***"' in text and "b2" not in text
    assert rd.read_json("config")["n"] == 1
    assert rd.files() == ["config.json"]


def test_parquet_rows_are_masked_and_no_temp_file_stays(tmp_path: Path) -> None:
    rd = RunDir.create(tmp_path, "t")
    rows = [{"endpoint": "old", "error": "401 from http://admin:pw9@h/v1 Bearer abcdefgh", "n": 1}]
    rd.write_records("one", rows, SCHEMA)
    with rd.record_writer("many", SCHEMA) as w:
        w.append(rows)
        assert any(is_temp(p) for p in rd.path.iterdir())  # rows go to a hidden temporary file until close
    for name in ("one", "many"):
        got = rd.read_records(name)
        assert got[0]["n"] == 1 and "pw9" not in got[0]["error"] and "abcdefgh" not in got[0]["error"]
    assert not any(is_temp(p) for p in rd.path.iterdir())


def test_a_runs_folder_that_cannot_be_made_is_bad_input(tmp_path: Path) -> None:
    blocker = tmp_path / "file"
    blocker.write_text("x")
    with pytest.raises(BadInput, match="cannot create the runs folder"):
        prepare_folder(blocker / "runs")
    with pytest.raises(BadInput, match="not a usable path"):
        RunDir.open("x" * 300)
