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


@pytest.mark.parametrize(
    ("content", "words"), [(b'{"a": ', "malformed JSON"), (b"[" * 5000 + b"]" * 5000, "malformed JSON")]
)
def test_a_damaged_result_file_is_bad_input_and_a_value_error(tmp_path: Path, content: bytes, words: str) -> None:
    rd = RunDir.create(tmp_path, "t")
    (rd.path / "summary.json").write_bytes(content)
    with pytest.raises(BadInput, match=words) as exc:
        rd.read_json("summary")
    assert isinstance(exc.value, ValueError)  # check's evidence marks such a part unreadable instead of failing


def test_a_result_of_the_wrong_shape_names_the_model_and_field(tmp_path: Path) -> None:
    from pydantic import BaseModel

    class Summary(BaseModel):
        name: str
        n: int

    rd = RunDir.create(tmp_path, "t")
    rd.write_json("summary", {"n": "many"})
    with pytest.raises(BadInput, match=r"not a Summary: name: Field required \(and 1 more\)"):
        rd.read_json("summary", Summary)


def test_a_result_file_that_is_a_device_or_fifo_is_refused_not_read_forever(tmp_path: Path) -> None:
    import os

    rd = RunDir.create(tmp_path, "t")
    (rd.path / "summary.json").symlink_to("/dev/zero")
    with pytest.raises(BadInput, match="larger than"):
        rd.read_json("summary")
    os.mkfifo(rd.path / "rows.parquet")
    with pytest.raises(BadInput, match="not a regular file"):
        rd.read_records("rows")
