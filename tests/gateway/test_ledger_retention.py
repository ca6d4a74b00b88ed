"""Ledger retention: at each rotation the oldest files beyond `keep_files` are deleted, so days of traffic take
bounded disk; the newest rows are all kept, readers pass over a file deleted under them and say how many rows
retention deleted, and the config field is validated."""

from __future__ import annotations

import pytest

from switchover.config.gateway import GatewayConfig
from switchover.gateway.ledger import Ledger, LedgerSkips, ledger_files, read_ledger, read_ledger_files, retired
from tests.gateway.test_ledger import rec


def _written(run_dir, ids: range, keep_files: int | None = None) -> Ledger:
    """A closed ledger of request rows `ids`, rotated every 600 bytes (a few rows a file)."""
    led = Ledger(run_dir, rotate_bytes=600, keep_files=keep_files)
    for i in ids:
        led.write(rec(i))
    led.close()
    return led


def test_keeps_at_most_keep_files_and_every_newest_row(tmp_path) -> None:
    led = _written(tmp_path, range(200), keep_files=3)
    files = ledger_files(tmp_path)
    assert len(files) == 3 and led.files_deleted > 10
    ids = [int(r.request_id[1:]) for r in read_ledger_files(files)]
    assert ids == list(range(ids[0], 200))  # a contiguous tail: nothing in between was lost
    assert sum(f.stat().st_size for f in files) <= 3 * 600


def test_without_keep_files_every_file_stays(tmp_path) -> None:
    led = _written(tmp_path, range(200))
    assert led.files_deleted == 0 and len(list(read_ledger_files(ledger_files(tmp_path)))) == 200


def test_a_reader_passes_over_a_file_deleted_between_listing_and_reading(tmp_path) -> None:
    _written(tmp_path, range(30))
    files = ledger_files(tmp_path)
    files[0].unlink()
    skipped = LedgerSkips()
    rows = list(read_ledger_files(files, skipped))
    assert rows and skipped.bad_lines == 0 and rows[-1].request_id == "r29"


@pytest.mark.parametrize("bad", [0, 1, -5, "many", 10**9])
def test_keep_files_below_two_or_absurd_is_refused(bad: object) -> None:
    with pytest.raises(ValueError, match="ledger_keep_files"):
        GatewayConfig.model_validate({"ledger_keep_files": bad})


def test_each_deleted_file_is_named_in_the_log(tmp_path, caplog) -> None:
    caplog.set_level("INFO", logger="switchover.gateway")
    led = _written(tmp_path, range(40), keep_files=2)
    said = [r.getMessage() for r in caplog.records if "ledger retention: deleted" in r.getMessage()]
    assert led.files_deleted > 0 and len(said) == led.files_deleted and "ledger-00000.jsonl" in said[0]


def test_deleted_rows_are_recorded_and_counted_by_readers(tmp_path) -> None:
    led = _written(tmp_path, range(200), keep_files=3)
    entries = retired(tmp_path)
    kept = len(list(read_ledger_files(ledger_files(tmp_path))))
    assert len(entries) == led.files_deleted and sum(e["rows"] for e in entries) + kept == 200
    assert entries[0]["file"] == "ledger-00000.jsonl" and entries[0]["first_ts"] <= entries[0]["last_ts"]
    skipped = LedgerSkips()
    assert len(list(read_ledger(tmp_path, skipped))) == kept
    assert skipped.retired_rows == 200 - kept and skipped.retired_files == led.files_deleted
    assert f"{200 - kept} ledger rows were deleted by ledger retention" in (skipped.note() or "")
    recent = LedgerSkips()
    recent.count_retired(tmp_path, since=entries[-1]["last_ts"] + 1)  # a window after every deleted row
    assert recent.retired_files == 0 and recent.note() is None


def test_files_from_before_a_restart_are_counted_when_deleted(tmp_path) -> None:
    _written(tmp_path, range(40))
    before = {p.name: len(p.read_bytes().splitlines()) for p in ledger_files(tmp_path)}
    _written(tmp_path, range(40, 80), keep_files=2)
    counted = {e["file"]: e["rows"] for e in retired(tmp_path) if e["file"] in before}
    assert counted and all(counted[name] == before[name] for name in counted)


def test_gate_and_compare_readers_count_the_deleted_rows_of_their_window(tmp_path) -> None:
    from switchover.rollout.gates import stream_ledger_rows

    _written(tmp_path, range(60), keep_files=2)
    whole = LedgerSkips()
    kept = len(list(stream_ledger_rows(tmp_path, None, whole)))
    assert whole.retired_rows == 60 - kept and "deleted by ledger retention" in (whole.note() or "")
    recent = LedgerSkips()
    assert list(stream_ledger_rows(tmp_path, 59.0, recent)) and recent.retired_rows == 0  # nothing of it deleted
