"""Gate ticks read only the ledger files that can hold rows of their window."""

from __future__ import annotations

import os
import time
from pathlib import Path

from switchover.ledger_files import LedgerSkips, files_that_may_hold, stream_ledger_rows
from tests.rollout.builders import traffic, write_ledger


def test_a_closed_ledger_file_older_than_the_window_is_not_read_again(tmp_path: Path) -> None:
    """Each gate tick reads only the files that can hold rows of its window: an old rotated file is skipped
    (a bad line in it would be counted if it were read), the newest file is always read."""
    now = time.time()
    old_file = tmp_path / "ledger-00000.jsonl"
    old_file.write_text("not json: this file must not be read for a recent window\n")
    os.utime(old_file, (now - 7200, now - 7200))
    write_ledger(tmp_path / "newer", traffic(now - 30, 10, new_share=0.5, seed=2))
    newest = tmp_path / "ledger-00001.jsonl"
    newest.write_bytes(next((tmp_path / "newer").glob("*.jsonl")).read_bytes())
    skipped = LedgerSkips()
    rows = list(stream_ledger_rows(tmp_path, since=now - 60, skipped=skipped))
    assert len(rows) == 10 and skipped.bad_lines == 0
    skipped_all = LedgerSkips()
    assert len(list(stream_ledger_rows(tmp_path, since=None, skipped=skipped_all))) == 10
    assert skipped_all.bad_lines == 1  # without a window every file is read


def test_the_newest_file_is_read_however_old_and_a_vanished_file_is_passed_over(tmp_path: Path) -> None:
    now = time.time()
    a, b = tmp_path / "ledger-00000.jsonl", tmp_path / "ledger-00001.jsonl"
    for p in (a, b):
        p.write_text("")
        os.utime(p, (now - 7200, now - 7200))
    assert files_that_may_hold([a, b], now) == [b]
    assert files_that_may_hold([tmp_path / "gone.jsonl", b], now) == [b]
    assert files_that_may_hold([a, b], now - 7200) == [a, b]
