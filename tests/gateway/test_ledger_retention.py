"""Ledger retention: at each rotation the oldest files beyond `keep_files` are deleted, so days of traffic take
bounded disk; the newest rows are all kept, readers pass over a file deleted under them, and the config field is
validated."""

from __future__ import annotations

import pytest

from switchover.config.gateway import GatewayConfig
from switchover.gateway.ledger import Ledger, LedgerSkips, ledger_files, read_ledger_files
from tests.gateway.test_ledger import rec


def test_keeps_at_most_keep_files_and_every_newest_row(tmp_path) -> None:
    led = Ledger(tmp_path, rotate_bytes=600, keep_files=3)
    for i in range(200):
        led.write(rec(i))
    led.close()
    files = ledger_files(tmp_path)
    assert len(files) == 3 and led.files_deleted > 10
    ids = [int(r.request_id[1:]) for r in read_ledger_files(files)]
    assert ids == list(range(ids[0], 200))  # a contiguous tail: nothing in between was lost
    assert sum(f.stat().st_size for f in files) <= 3 * 600


def test_without_keep_files_every_file_stays(tmp_path) -> None:
    led = Ledger(tmp_path, rotate_bytes=600)
    for i in range(200):
        led.write(rec(i))
    led.close()
    assert led.files_deleted == 0 and len(list(read_ledger_files(ledger_files(tmp_path)))) == 200


def test_a_reader_passes_over_a_file_deleted_between_listing_and_reading(tmp_path) -> None:
    led = Ledger(tmp_path, rotate_bytes=600)
    for i in range(30):
        led.write(rec(i))
    led.close()
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
    led = Ledger(tmp_path, rotate_bytes=600, keep_files=2)
    for i in range(40):
        led.write(rec(i))
    led.close()
    said = [r.getMessage() for r in caplog.records if "ledger retention: deleted" in r.getMessage()]
    assert led.files_deleted > 0 and len(said) == led.files_deleted and "ledger-00000.jsonl" in said[0]
