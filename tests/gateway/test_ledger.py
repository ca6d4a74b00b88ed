"""Ledger: JSONL request and shadow rows, rotation by size, restart continues numbering, torn last line
skipped, bad lines skipped and counted."""

from __future__ import annotations

import orjson

from switchover.gateway.ledger import Ledger
from switchover.ledger_files import LedgerSkips, ledger_files, read_ledger, read_requests
from switchover.ledger_record import LedgerRecord, ShadowRecord, ShadowResult


def rec(i: int) -> LedgerRecord:
    return LedgerRecord(
        ts=float(i),
        request_id=f"r{i}",
        tenant="00ff",
        bucket=i % 10000,
        path="/v1/completions",
        routed="new",
        route_reason="weight",
        arm="new",
        outcome="ok",
        status=200,
        stream=True,
    )


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


def shadow_dict(i: int) -> dict:
    """A shadow row's fields as a plain dict, None values included (validated into ShadowRecord to be written)."""
    return {
        "ts": i + 0.5,
        "request_id": f"r{i}",
        "path": "/v1/completions",
        "routed": "old",
        "arm": "old",
        "outcome": "ok",
        "status": 200,
        "stream": True,
        "ttft_ms": 40.0,
        "tpot_ms": 9.5,
        "e2e_ms": 300.0,
        "completion_tokens": 20,
        "tokens_source": "usage",
        "finish_reason": "stop",
        "shadow": {
            "upstream": "new",
            "dropped": False,
            "status": 200,
            "ttft_ms": 55.0,
            "tpot_ms": None,
            "completion_tokens": 18,
            "finish_reason": "length",
            "error": None,
        },
    }


def test_shadow_rows_round_trip_next_to_request_rows(tmp_path):
    led = Ledger(tmp_path)
    led.write(rec(1).model_copy(update={"shadowed": True}))
    led.write(ShadowRecord.model_validate(shadow_dict(1)))
    led.write(ShadowRecord.model_validate(shadow_dict(2)))
    led.close()
    lines = [orjson.loads(x) for x in ledger_files(tmp_path)[0].read_bytes().splitlines()]
    assert "kind" not in lines[0] and lines[1]["kind"] == lines[2]["kind"] == "shadow"
    assert "tpot_ms" not in lines[1]["shadow"]  # None left out inside the result too
    req, sh, sh2 = read_ledger(tmp_path)
    assert isinstance(req, LedgerRecord) and req.kind == "request" and req.shadowed is True
    assert isinstance(sh, ShadowRecord) and sh == ShadowRecord.model_validate(shadow_dict(1))
    assert sh.shadow == ShadowResult(
        upstream="new", status=200, ttft_ms=55.0, completion_tokens=18, finish_reason="length"
    )
    assert isinstance(sh2, ShadowRecord) and sh2.request_id == "r2"
    assert (led.written, led.shadows_written) == (1, 2)
    assert [r.request_id for r in read_requests(tmp_path)] == ["r1"]


def test_bad_lines_are_skipped_and_counted_and_a_torn_tail_counted_apart(tmp_path):
    led = Ledger(tmp_path)
    led.write(rec(1))
    led.close()
    with ledger_files(tmp_path)[0].open("ab") as fh:
        fh.write(b"\x00garbage, not json\n")  # line 2
        fh.write(b'{"ts": 2.0, "request_id": "r2"}\n')  # line 3: JSON, but not a row
        fh.write(b"[1, 2]\n")  # line 4
        fh.write(b"\n")  # an empty line is nothing, not a bad line
        fh.write(orjson.dumps(shadow_dict(1) | {"kind": "mirror"}) + b"\n")  # line 6: unknown kind
    led = Ledger(tmp_path)
    led.write(rec(3))
    led.write(ShadowRecord.model_validate(shadow_dict(3)))
    led.close()
    with ledger_files(tmp_path)[1].open("ab") as fh:
        fh.write(b'{"ts": 4.0, "request_')  # being written
    skipped = LedgerSkips()
    rows = list(read_ledger(tmp_path, skipped))
    assert [(r.kind, r.request_id) for r in rows] == [("request", "r1"), ("request", "r3"), ("shadow", "r3")]
    assert (skipped.bad_lines, skipped.torn_tail) == (4, 1)
    assert len(skipped.examples) == 3  # capped
    assert skipped.examples[0] == "ledger-00000.jsonl:2: not JSON"
    assert skipped.examples[1].startswith("ledger-00000.jsonl:3: not a request row: ")
    assert "path" in skipped.examples[1] and "+" in skipped.examples[1]  # the first missing field, and a count
    assert skipped.examples[2] == "ledger-00000.jsonl:4: not a JSON object (list)"
    note = skipped.note()
    assert note is not None and note.startswith("4 ledger lines could not be read and were skipped (ledger-00000")


def test_a_torn_line_in_an_older_file_is_a_bad_line_not_a_tail(tmp_path):
    (tmp_path / "ledger-00000.jsonl").write_bytes(orjson.dumps(rec(1).model_dump()) + b"\n" + b'{"ts": 2.0, "req')
    led = Ledger(tmp_path)  # the gateway crashed mid-line and restarted
    led.write(rec(3))
    led.close()
    skipped = LedgerSkips()
    assert [r.request_id for r in read_ledger(tmp_path, skipped)] == ["r1", "r3"]
    assert (skipped.bad_lines, skipped.torn_tail) == (1, 0)
    assert "torn line" in skipped.examples[0] and skipped.examples[0].startswith("ledger-00000.jsonl:2:")


def test_no_note_when_nothing_was_bad(tmp_path):
    led = Ledger(tmp_path)
    led.write(rec(1))
    led.close()
    skipped = LedgerSkips()
    assert len(list(read_ledger(tmp_path, skipped))) == 1
    assert skipped.note() is None and skipped == LedgerSkips()


def test_rotation_with_shadow_rows_keeps_every_row_in_order(tmp_path):
    led = Ledger(tmp_path, rotate_bytes=900)
    for i in range(20):
        led.write(rec(i))
        if i % 2 == 0:
            led.write(ShadowRecord.model_validate(shadow_dict(i)))
    led.close()
    files = ledger_files(tmp_path)
    assert len(files) > 5 and all(f.stat().st_size <= 900 for f in files)
    assert any(b'"kind":"shadow"' in f.read_bytes() for f in files[1:])  # shadow rows crossed a rotation
    skipped = LedgerSkips()
    got = [(r.kind, r.request_id) for r in read_ledger(tmp_path, skipped)]
    want = []
    for i in range(20):
        want += [("request", f"r{i}")] + ([("shadow", f"r{i}")] if i % 2 == 0 else [])
    assert got == want and skipped == LedgerSkips()
    assert (led.written, led.shadows_written) == (20, 10)
