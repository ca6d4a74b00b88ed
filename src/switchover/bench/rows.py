"""The raw per-request row of a bench run (one Parquet row per request), built from a wire `RequestRecord`.

Rows keep every chunk's arrival time and text, the server's usage and the failure, so any tool's metric can
be recomputed from `requests.parquet` later (`switchover bench recompute`).
"""

from __future__ import annotations

from typing import Any

import pyarrow as pa

from switchover.redaction import redact
from switchover.runs import RecordWriter
from switchover.wire import RequestRecord

ROW_SCHEMA = pa.schema(
    [
        ("endpoint", pa.string()),  # old | new | a label
        ("step", pa.int32()),  # index in the ladder
        ("repeat", pa.int32()),  # ABAB repetition of this step
        ("concurrency", pa.int32()),  # target in-flight requests (null in rate mode)
        ("rate", pa.float64()),  # target req/s (null in concurrency mode)
        ("bucket", pa.string()),  # ISL bucket label, e.g. "128", or "dataset"
        ("isl_target", pa.int32()),  # wanted prompt tokens (null for datasets)
        ("osl_target", pa.int32()),  # max_tokens asked for
        ("index", pa.int32()),  # request number within the step
        ("warmup", pa.bool_()),  # excluded from statistics
        ("sched_ns", pa.int64()),  # when it could go: scheduled (rate/trace) or its slot freed (concurrency), ns
        ("send_ns", pa.int64()),
        ("headers_ns", pa.int64()),
        ("first_byte_ns", pa.int64()),
        ("end_ns", pa.int64()),  # last byte of the response
        ("usage_ns", pa.int64()),
        ("started_wall", pa.float64()),
        ("chunk_ns", pa.list_(pa.int64())),  # arrival of each event carrying choices
        ("chunk_text", pa.list_(pa.string())),  # its text delta ("" for role-only or finish-only events)
        ("status", pa.int32()),
        ("finish_reason", pa.string()),
        ("prompt_tokens", pa.int32()),  # usage.prompt_tokens
        ("completion_tokens", pa.int32()),  # usage.completion_tokens
        ("cached_tokens", pa.int32()),
        ("retok_tokens", pa.int32()),  # output re-tokenized by the client (cross-check only)
        ("done_seen", pa.bool_()),
        ("failure_kind", pa.string()),
        ("failure_message", pa.string()),
        ("output_text", pa.string()),
    ]
)

COLUMNS = tuple(ROW_SCHEMA.names)
# min/max statistics only for the scalar columns: those of the chunk lists and texts cost ~27 KB of writer memory
# per row group until the file closes (27 MB for a million requests), and nobody filters on them
STAT_COLUMNS = [
    f.name for f in ROW_SCHEMA if not pa.types.is_list(f.type) and f.name not in ("output_text", "failure_message")
]
# dictionary encoding for the columns whose values repeat; not for the clock readings and request numbers, unique per
# row or event: with engine-like distinct stamps, encoding them too made a 1,024-row group 1.8-2.0x slower to write
# and 8 % larger (python bench/parquet_rows.py)
UNIQUE_COLUMNS = ("index", "sched_ns", "send_ns", "headers_ns", "first_byte_ns", "end_ns", "usage_ns", "started_wall")
DICT_COLUMNS = [c for c in COLUMNS if c not in (*UNIQUE_COLUMNS, "chunk_ns")]


def row_from_record(rec: RequestRecord, **labels: Any) -> dict[str, Any]:
    """Flatten one record plus its labels (endpoint, step, bucket, index, warmup...) into a row."""
    usage = rec.usage
    row: dict[str, Any] = dict.fromkeys(COLUMNS)
    row.update(
        send_ns=rec.send_ns,
        headers_ns=rec.headers_ns,
        first_byte_ns=rec.first_byte_ns,
        end_ns=rec.end_ns,
        usage_ns=rec.usage_ns,
        started_wall=rec.started_wall,
        chunk_ns=list(rec.chunk_ns),
        chunk_text=list(rec.chunk_text),
        status=rec.status,
        finish_reason=rec.finish_reason,
        prompt_tokens=usage.prompt_tokens if usage else None,
        completion_tokens=usage.completion_tokens if usage else None,
        cached_tokens=usage.cached_tokens if usage else None,
        done_seen=rec.done_seen,
        failure_kind=rec.failure.kind.value if rec.failure else None,
        failure_message=rec.failure.message if rec.failure else None,
        output_text=rec.text,
    )
    unknown = set(labels) - set(COLUMNS)
    if unknown:
        raise ValueError(f"unknown row labels: {sorted(unknown)}")
    row.update(labels)
    return row


class RowSink:
    """Rows on their way to Parquet: buffered until a row group's worth (by rows or by chunk stamps), then written,
    so a run holds at most one row group in memory whatever its length. Failure messages are redacted here; the
    model's output text is the server's answer to prompts the run made up (or the user's dataset), kept as sent."""

    def __init__(self, writer: Any, max_rows: int = 4096, max_chunks: int = 65536) -> None:
        self.writer = writer  # a runs.RecordWriter (anything with append(list of rows))
        self.max_rows, self.max_chunks = max_rows, max_chunks
        self.buf: list[dict[str, Any]] = []
        self.chunks = 0
        self.written = 0

    def add(self, row: dict[str, Any]) -> None:
        msg = row.get("failure_message")
        if msg:  # the one free text a server or the client writes (an error body may quote a key): masked here
            row["failure_message"] = redact(msg)
        self.buf.append(row)
        self.chunks += len(row.get("chunk_ns") or ())
        if len(self.buf) >= self.max_rows or self.chunks >= self.max_chunks:
            self.flush()

    def add_batch(self, batch: Any) -> None:
        """A RowBatch (bench/batch.py) as one row group, after the rows buffered before it (order kept)."""
        self.flush()
        if isinstance(self.writer, RecordWriter) and not self.writer.redacted:
            self.writer.append_table(batch.table())
        else:  # a writer of row dicts (Parquet parts), or one that redacts each row itself
            self.writer.append([batch.row(i) for i in range(len(batch))])
        self.written += len(batch)

    def flush(self) -> None:
        """Write what is buffered as one row group."""
        if self.buf:
            self.writer.append(self.buf)
            self.written += len(self.buf)
            self.buf = []
            self.chunks = 0
