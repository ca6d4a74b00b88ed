"""Ledger retention: at each rotation the oldest files beyond `keep_files` are deleted, so days of traffic take
bounded disk; the newest rows are all kept, readers pass over a file deleted under them and say how many rows
retention deleted, and the config field is validated."""

from __future__ import annotations

import pytest

from switchover.config.gateway import GatewayConfig
from switchover.gateway.ledger import Ledger
from switchover.ledger_files import (
    CLOCK_SLACK_S,
    RETIRED,
    LedgerSkips,
    ledger_files,
    read_ledger,
    read_ledger_files,
    retired,
)
from tests.gateway.test_ledger import rec


def _written(run_dir, ids: range, keep_files: int | None = None, ts_step: float = 1.0) -> Ledger:
    """A closed ledger of request rows `ids` (arrived at i x ts_step), rotated every 600 bytes (a few rows a file)."""
    led = Ledger(run_dir, rotate_bytes=600, keep_files=keep_files)
    for i in ids:
        led.write(rec(i).model_copy(update={"ts": i * ts_step}))
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
    led = _written(tmp_path, range(200), keep_files=3, ts_step=1000.0)
    entries = retired(tmp_path)
    kept = len(list(read_ledger_files(ledger_files(tmp_path))))
    assert len(entries) == led.files_deleted and sum(e["rows"] for e in entries) + kept == 200
    assert entries[0]["file"] == "ledger-00000.jsonl" and entries[0]["first_ts"] <= entries[0]["last_ts"]
    skipped = LedgerSkips()
    assert len(list(read_ledger(tmp_path, skipped))) == kept
    assert skipped.retired_rows == 200 - kept and skipped.retired_files == led.files_deleted
    assert f"up to {200 - kept} ledger rows were deleted by ledger retention" in (skipped.note() or "")
    recent = LedgerSkips()  # a window that starts after every deleted row arrived, beyond the clock slack
    recent.count_retired(tmp_path, since=entries[-1]["last_ts"] + CLOCK_SLACK_S + 1)
    assert recent.retired_files == 0 and recent.note() is None


def test_a_file_is_dated_by_its_latest_arrival_not_its_last_row(tmp_path) -> None:
    led = Ledger(tmp_path, rotate_bytes=600, keep_files=2)
    for i, ts in enumerate([5000.0, 6000.0, 1000.0]):  # a long request arrived first and ended last
        led.write(rec(i).model_copy(update={"ts": ts}))
    for i in range(3, 40):
        led.write(rec(i).model_copy(update={"ts": 10_000.0 + i}))
    led.close()
    first = retired(tmp_path)[0]
    assert (first["first_ts"], first["last_ts"]) == (1000.0, 6000.0)
    window = LedgerSkips()
    window.count_retired(tmp_path, since=6000.0 + CLOCK_SLACK_S)  # the 6000 row is inside (with the slack)
    assert window.retired_files >= 1


def test_files_from_before_a_restart_are_deleted_without_reading_them(tmp_path) -> None:
    _written(tmp_path, range(40))
    before = {p.name: p.stat().st_mtime for p in ledger_files(tmp_path)}
    _written(tmp_path, range(40, 80), keep_files=2)
    old = [e for e in retired(tmp_path) if e["file"] in before]
    assert old and all(e["rows"] is None and e["last_ts"] == before[e["file"]] for e in old)
    skipped = LedgerSkips()
    skipped.count_retired(tmp_path)
    note = skipped.note() or ""
    assert skipped.retired_uncounted == len(old) and "written before a gateway restart (not counted)" in note
    assert ("up to" in note) == (skipped.retired_files > len(old))  # no bound is claimed for rows not counted


def test_a_torn_manifest_line_does_not_swallow_the_next_entry(tmp_path) -> None:
    (tmp_path / RETIRED).write_bytes(b'{"file": "ledger-99999.jsonl", "ro')  # a crash mid-write
    led = _written(tmp_path, range(60), keep_files=2)
    assert len(retired(tmp_path)) == led.files_deleted


def test_the_newest_manifest_entries_are_read_and_a_fifo_is_not(tmp_path, monkeypatch) -> None:
    import os

    import switchover.ledger_files as ledger_mod

    monkeypatch.setattr(ledger_mod, "MAX_RETIRED_BYTES", 200)
    lines = [f'{{"file": "ledger-{i:05d}.jsonl", "rows": 1, "last_ts": {i}}}' for i in range(40)]
    (tmp_path / RETIRED).write_text("\n".join(lines) + "\n")
    got = retired(tmp_path)
    assert got and got[-1]["last_ts"] == 39 and len(got) < 40  # the tail, whole lines only
    fifo = tmp_path / "f"
    fifo.mkdir()
    os.mkfifo(fifo / RETIRED)
    assert retired(fifo) == []  # not opened: a FIFO would block the reader


def test_gate_and_compare_readers_count_the_deleted_rows_of_their_window(tmp_path) -> None:
    from switchover.ledger_files import stream_ledger_rows

    _written(tmp_path, range(60), keep_files=2, ts_step=1000.0)
    whole = LedgerSkips()
    kept = len(list(stream_ledger_rows(tmp_path, None, whole)))
    assert whole.retired_rows == 60 - kept and "deleted by ledger retention" in (whole.note() or "")
    recent = LedgerSkips()
    assert list(stream_ledger_rows(tmp_path, 59_000.0, recent)) and recent.retired_rows == 0  # nothing of it deleted


def test_a_tail_read_that_starts_on_a_line_boundary_keeps_that_line(tmp_path, monkeypatch) -> None:
    import switchover.ledger_files as ledger_mod

    line = '{"file": "ledger-00000.jsonl", "rows": 1, "last_ts": 1}\n'
    (tmp_path / RETIRED).write_text(line * 4)
    monkeypatch.setattr(ledger_mod, "MAX_RETIRED_BYTES", 2 * len(line))
    assert len(retired(tmp_path)) == 2
