"""Rows held as columns (bench/batch.py): the same Parquet rows and the same step summary as one row at a time."""

from __future__ import annotations

import pathlib
import random

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from switchover.bench.accumulate import StepAccumulator
from switchover.bench.batch import RowBatch
from switchover.bench.rows import ROW_SCHEMA, RowSink, row_from_record
from switchover.bench.stats import Slo
from switchover.redaction import redact
from switchover.runs import RecordWriter
from switchover.wire import Failure, FailureKind, RequestRecord
from switchover.wire.records import Usage

MS = 1_000_000
LABELS = {"endpoint": "new", "step": 1, "repeat": 0, "concurrency": 8, "rate": None, "bucket": "dataset"}


def records(n: int, seed: int) -> list[tuple[RequestRecord, dict]]:
    """Finished requests in completion order with every irregular shape: failures (with and without an end),
    a role-only first event, N missing, N = 0 and 1, no events at all, equal stamps (one read), warm-ups."""
    rng = random.Random(seed)
    out = []
    t = 0
    for i in range(n):
        t += rng.randint(0, 300_000)
        send = t
        k = rng.randint(0, 9)
        first = send + rng.randint(1, 40) * MS
        stamps = [first]
        for _ in range(rng.randint(0, 10)):
            stamps.append(stamps[-1] + rng.choice([0, rng.randint(1, 20) * 100_000]))
        texts = ["w"] * len(stamps)
        if k == 1:
            texts[0] = ""  # role-only first event: the first token is the second event
        if k == 2:
            stamps, texts = [], []
        n_out: int | None = len(stamps)
        if k == 3:
            n_out = None
        elif k == 4:
            n_out = rng.choice([0, 1])
        rec = RequestRecord(
            api="chat",
            stream=True,
            model="m",
            started_wall=1.0 + i,
            send_ns=send,
            status=200,
            headers_ns=send + 10,
            first_byte_ns=first,
            chunk_ns=stamps,
            chunk_text=texts,
            texts={0: "".join(texts)},
            finish_reasons={0: "length"},
            done_seen=True,
            usage=None
            if n_out is None
            else Usage(prompt_tokens=60 + rng.randint(0, 3), completion_tokens=n_out, cached_tokens=None),
        )
        rec.end_ns = (stamps[-1] if stamps else first) + 40_000
        if k == 5:
            rec.failure = Failure(FailureKind.STREAM_ERROR, "error event mid-stream: key sk-abcdefabcdefabcdefabcdef0")
            if rng.random() < 0.5:
                rec.end_ns = None
        sched = send - rng.randint(0, 9) * 1000 if k != 6 else None  # when its slot freed (none: no lag counted)
        extra = {
            "index": i,
            "warmup": i < 2,
            "sched_ns": sched,
            "isl_target": 64,
            "osl_target": 8,
            "retok_tokens": None if rec.failure else (n_out or 0) + rng.choice([0, 1]),
        }
        out.append((rec, extra))
    rng.shuffle(out)
    return out


def _batches(recs: list[tuple[RequestRecord, dict]], sizes: list[int]) -> list[RowBatch]:
    out, i = [], 0
    for size in sizes:
        b = RowBatch(LABELS)
        for rec, extra in recs[i : i + size]:
            b.add(rec, **extra)
        out.append(b)
        i += size
    return out


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_a_batched_step_summarises_exactly_as_rows_added_one_by_one(seed):
    recs = records(700, seed)
    slo = Slo(ttft_ms=30, tpot_ms=1.5, e2e_ms=35)
    one = StepAccumulator(slo=slo, labels=LABELS, limit=300, itl_limit=2000, seed=4)
    for rec, extra in recs:
        one.add(row_from_record(rec, **LABELS, **extra))
    many = StepAccumulator(slo=slo, labels=LABELS, limit=300, itl_limit=2000, seed=4)
    for b in _batches(recs, [1, 250, 0, 449]):
        many.add_batch(b)
    a, b = one.summary().model_dump(), many.summary().model_dump()
    for dist in ("ttft_ms", "tpot_ms", "itl_ms", "e2e_ms", "ntpot_ms"):  # past the limit: moments summed in
        for stat in ("mean", "std"):  # other batches, so equal to the last bits only
            assert a[dist][stat] == pytest.approx(b[dist][stat], rel=1e-12)
            a[dist][stat] = b[dist][stat]
    assert a == b
    assert many.missing == one.missing and many.missing["ttft"]  # the reasons, per metric, counted alike
    assert many.values("itl") == one.values("itl")  # the same reservoir: values fed in the same order


def test_a_batch_writes_the_rows_row_from_record_gives(tmp_path):
    recs = records(300, 7)
    rows = [row_from_record(rec, **LABELS, **extra) for rec, extra in recs]
    writer = RecordWriter(tmp_path / "requests.parquet", ROW_SCHEMA, redacted=False)
    sink = RowSink(writer)
    sink.add(rows[0])  # a row buffered before a batch is written before it
    for b in _batches(recs[1:], [120, 179]):
        sink.add_batch(b)
    writer.close()
    got = pq.read_table(tmp_path / "requests.parquet").to_pylist()
    want = pa.Table.from_pylist(rows, schema=ROW_SCHEMA).to_pylist()
    for w in want:  # failure messages masked on the way (an error body may quote a key)
        w["failure_message"] = redact(w["failure_message"]) if w["failure_message"] else w["failure_message"]
    assert "sk-abcdef" not in str(got) and any(g["failure_message"] for g in got)
    assert got == want
    assert pq.ParquetFile(tmp_path / "requests.parquet").num_row_groups == 3


def test_a_batch_without_any_event_still_counts_its_failures_and_missing_metrics():
    b = RowBatch(LABELS)
    rec = RequestRecord(
        api="chat",
        stream=True,
        model="m",
        started_wall=0.0,
        send_ns=5,
        end_ns=9,
        failure=Failure(FailureKind.CONNECT, "refused"),
    )
    b.add(rec, index=0, warmup=False, sched_ns=None, isl_target=None, osl_target=8)
    acc = StepAccumulator(labels=LABELS)
    acc.add_batch(b)
    s = acc.summary()
    assert (s.requests, s.ok, s.failed, s.errors) == (1, 0, 1, {"connect": 1})
    assert s.missing["ttft"] == {"request failed (connect)": 1}


def test_a_redacting_record_writer_refuses_a_prepared_table(tmp_path: pathlib.Path) -> None:
    import pyarrow as pa

    writer = RecordWriter(tmp_path / "x.parquet", pa.schema([("a", pa.int64())]))  # redacted=True by default
    with pytest.raises(ValueError, match="redacting writer"):
        writer.append_table(pa.table({"a": [1]}))
    writer.close()


texts_st = st.lists(st.text(max_size=6), max_size=12)


@settings(max_examples=150, deadline=None)
@given(st.lists(st.tuples(texts_st, st.integers(-2, 2)), min_size=1, max_size=8))
def test_event_texts_of_any_script_come_out_of_the_table_and_row_as_they_went_in(shapes):
    """Texts in any script (ASCII, accents, CJK, emoji; empty ones), and as many or fewer/more texts than stamps."""
    recs = []
    for i, (texts, extra_stamps) in enumerate(shapes):
        stamps = list(range(100 * i, 100 * i + max(len(texts) + extra_stamps, 0)))
        recs.append(
            (
                RequestRecord(
                    api="chat",
                    stream=True,
                    model="m",
                    started_wall=0.0,
                    send_ns=1,
                    status=200,
                    end_ns=5,
                    chunk_ns=stamps,
                    chunk_text=texts,
                    texts={0: "".join(texts)},
                ),
                {"index": i, "warmup": False, "sched_ns": None, "isl_target": None, "osl_target": 4},
            )
        )
    (b,) = _batches(recs, [len(recs)])
    want = [row_from_record(rec, **LABELS, **extra) for rec, extra in recs]
    got = b.table().to_pylist()
    assert [g["chunk_text"] for g in got] == [w["chunk_text"] for w in want]
    assert [g["chunk_ns"] for g in got] == [w["chunk_ns"] for w in want]
    assert got == pa.Table.from_pylist(want, schema=ROW_SCHEMA).to_pylist()
    assert [b.row(i) for i in range(len(b))] == [{**w, "retok_tokens": None} for w in want]


def test_a_text_no_json_parser_gives_is_stored_marked_not_crashing_the_flush():
    rec = RequestRecord(
        api="chat", stream=True, model="m", started_wall=0.0, send_ns=1, chunk_ns=[2, 3], chunk_text=["a", "\ud800"]
    )
    b = RowBatch(LABELS)
    b.add(rec, index=0, warmup=False, sched_ns=None, isl_target=None, osl_target=2)
    assert b.table().column("chunk_text").to_pylist() == [["a", "?"]]
