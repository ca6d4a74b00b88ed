"""Ledger: JSONL rows, rotation by size, restart continues numbering, torn last line skipped."""

from __future__ import annotations

from switchover.gateway.ledger import Ledger, ledger_files, read_ledger
from switchover.gateway.ledger_record import LedgerRecord


def rec(i: int) -> LedgerRecord:
    return LedgerRecord(ts=float(i), request_id=f"r{i}", tenant="00ff", bucket=i % 10000, path="/v1/completions",
                        routed="new", route_reason="weight", arm="new", outcome="ok", status=200, stream=True)


def test_rotates_and_reads_back_in_order(tmp_path):
    led = Ledger(tmp_path, rotate_bytes=600)
    for i in range(20):
        led.write(rec(i))
    led.close()
    files = ledger_files(tmp_path)
    assert len(files) > 3 and files[0].name == "ledger-00000.jsonl"
    assert all(f.stat().st_size <= 600 for f in files)
    assert [r.request_id for r in read_ledger(tmp_path)] == [f"r{i}" for i in range(20)]


def test_restart_appends_to_a_new_file_and_never_overwrites(tmp_path):
    a = Ledger(tmp_path)
    a.write(rec(1))
    a.close()
    b = Ledger(tmp_path)
    b.write(rec(2))
    b.close()
    assert [f.name for f in ledger_files(tmp_path)] == ["ledger-00000.jsonl", "ledger-00001.jsonl"]
    assert [r.request_id for r in read_ledger(tmp_path)] == ["r1", "r2"]


def test_a_torn_last_line_is_skipped(tmp_path):
    led = Ledger(tmp_path)
    led.write(rec(1))
    led.close()
    with ledger_files(tmp_path)[-1].open("ab") as fh:
        fh.write(b'{"ts": 1.0, "request_')
    assert [r.request_id for r in read_ledger(tmp_path)] == ["r1"]


def test_rows_omit_empty_fields_and_hold_no_prompt_by_default(tmp_path):
    led = Ledger(tmp_path)
    led.write(rec(1))
    led.close()
    line = ledger_files(tmp_path)[0].read_text()
    assert "prompt" not in line and "null" not in line


def test_rows_are_batched_until_the_flush_interval_or_flush(tmp_path):
    led = Ledger(tmp_path, flush_interval_s=3600)
    led.write(rec(1))  # the first write flushes (no flush yet in this interval)
    led.write(rec(2))
    assert [r.request_id for r in read_ledger(tmp_path)] == ["r1"]
    led.flush()
    assert [r.request_id for r in read_ledger(tmp_path)] == ["r1", "r2"]
    led.close()
