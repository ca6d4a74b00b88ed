"""Finished requests of one step held as columns, so the hot path appends a few values per request and the row
group's Parquet table and the step's statistics are built once per few thousand requests (vectorised), not a row
dict, a metrics object and a list of gaps per request (a third of a 40,000-request run's CPU before)."""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import numpy as np
import pyarrow as pa

from switchover.bench.rows import ROW_SCHEMA
from switchover.redaction import redact
from switchover.wire import Failure, RequestRecord

if TYPE_CHECKING:
    from switchover.bench.accumulate import StepAccumulator
    from switchover.bench.rows import RowSink
    from switchover.bench.scheduler import Sent
    from switchover.bench.workload import Prompt

LABELS = ("endpoint", "step", "repeat", "concurrency", "rate", "bucket")


# the per-row values `add` takes from a record, in this order (then the six the caller gives: _META)
_FROM_RECORD = (
    "send_ns",
    "headers_ns",
    "first_byte_ns",
    "end_ns",
    "usage_ns",
    "started_wall",
    "status",
    "finish_reason",
    "prompt_tokens",
    "completion_tokens",
    "cached_tokens",
    "done_seen",
    "failure_kind",
    "failure_message",
    "output_text",
)
_META = ("index", "warmup", "sched_ns", "isl_target", "osl_target", "retok_tokens")


class RowBatch:
    """Rows of one step (its labels shared). `add` takes what the rows need from a finished record while it is still
    in the CPU's cache: its scalar values as one tuple, its event stamps and texts onto two flat lists (references,
    no conversion). The record is then let go. A flush builds the statistics' numpy arrays and the Parquet table
    from those lists at once, per row group, not value by value per request."""

    __slots__ = ("_cols", "_ns", "first", "labels", "offsets", "stamps", "text_offsets", "texts", "values")

    def __init__(self, labels: dict[str, Any]) -> None:
        self.labels = {k: labels.get(k) for k in LABELS}
        self.values: list[tuple[Any, ...]] = []  # per row: _FROM_RECORD then _META
        self.stamps: list[int] = []  # every row's event times, one after the other
        self.offsets = [0]  # row i's stamps are stamps[offsets[i]:offsets[i + 1]]
        self.texts: list[str] = []  # every row's event texts, one after the other
        self.text_offsets = [0]  # row i's texts are texts[text_offsets[i]:text_offsets[i + 1]]
        self.first: list[int] = []  # row i's first event with text (the first token), -1 when none
        self._cols: dict[str, list[Any]] | None = None
        self._ns: np.ndarray | None = None

    def __len__(self) -> int:
        return len(self.values)

    @property
    def chunks(self) -> int:
        return len(self.stamps)

    def add(
        self,
        rec: RequestRecord,
        *,
        index: int,
        warmup: bool,
        sched_ns: int | None,
        isl_target: int | None,
        osl_target: int | None,
        retok_tokens: int | None = None,
    ) -> None:
        """One finished request: the values `rows.row_from_record` gives (failure messages masked here)."""
        usage, failure, texts = rec.usage, rec.failure, rec.chunk_text
        self.values.append(
            (
                rec.send_ns,
                rec.headers_ns,
                rec.first_byte_ns,
                rec.end_ns,
                rec.usage_ns,
                rec.started_wall,
                rec.status,
                rec.finish_reasons.get(0),
                usage.prompt_tokens if usage else None,
                usage.completion_tokens if usage else None,
                usage.cached_tokens if usage else None,
                rec.done_seen,
                failure.kind.value if failure else None,
                _masked(failure),
                rec.texts.get(0, ""),
                index,
                warmup,
                sched_ns,
                isl_target,
                osl_target,
                retok_tokens,
            )
        )
        self.stamps += rec.chunk_ns
        self.offsets.append(len(self.stamps))
        self.texts += texts
        self.text_offsets.append(len(self.texts))
        self.first.append(_first_text(texts, len(rec.chunk_ns)))
        self._cols = self._ns = None

    @property
    def cols(self) -> dict[str, list[Any]]:
        """The per-row columns (the values `rows.row_from_record` gives; failure messages masked)."""
        if self._cols is None:
            by_column = zip(*self.values, strict=True) if self.values else iter([()] * len(_FROM_RECORD + _META))
            self._cols = {name: list(col) for name, col in zip(_FROM_RECORD + _META, by_column, strict=True)}
        return self._cols

    @property
    def chunk_ns(self) -> np.ndarray:
        """Every row's event times as one read-only int64 array (converted once: the statistics and the Parquet
        table of a flush share it)."""
        if self._ns is None:
            self._ns = np.array(self.stamps, dtype=np.int64)
            self._ns.flags.writeable = False
        return self._ns

    def table(self) -> pa.Table:
        """The rows as one Parquet-ready table (ROW_SCHEMA)."""
        n, cols = len(self), self.cols
        arrays: list[pa.Array] = []
        for f in ROW_SCHEMA:
            if f.name in self.labels:
                arrays.append(pa.array([self.labels[f.name]] * n, f.type))
            elif f.name == "chunk_ns":
                arrays.append(pa.ListArray.from_arrays(pa.array(self.offsets, pa.int32()), pa.array(self.chunk_ns)))
            elif f.name == "chunk_text":
                arrays.append(pa.ListArray.from_arrays(pa.array(self.text_offsets, pa.int32()), _strings(self.texts)))
            else:
                arrays.append(pa.array(cols[f.name], f.type))
        return pa.Table.from_arrays(arrays, schema=ROW_SCHEMA)

    def row(self, i: int) -> dict[str, Any]:
        """Row i as a dict (the per-row form: bench/rows.py)."""
        a, b = self.offsets[i], self.offsets[i + 1]
        ta, tb = self.text_offsets[i], self.text_offsets[i + 1]
        return {
            **self.labels,
            **{k: v[i] for k, v in self.cols.items()},
            "chunk_ns": self.stamps[a:b],
            "chunk_text": self.texts[ta:tb],
        }

    def arrays(self) -> dict[str, np.ndarray]:
        """The columns the statistics need, as numpy arrays (nulls as masks: `*_ok`)."""
        c = self.cols
        end = c["end_ns"]
        n_out = c["completion_tokens"]
        return {
            "send": np.array(c["send_ns"], dtype=np.int64),
            "end": np.array([0 if e is None else e for e in end], dtype=np.int64),
            "end_ok": np.array([e is not None for e in end], dtype=bool),
            "warm": np.array(c["warmup"], dtype=bool),
            "ok": np.array([k is None for k in c["failure_kind"]], dtype=bool),
            "n": np.array([0 if v is None else v for v in n_out], dtype=np.int64),
            "n_ok": np.array([v is not None for v in n_out], dtype=bool),
            "first": np.array(self.first, dtype=np.int64),
            "offsets": np.array(self.offsets, dtype=np.int64),
            "chunk_ns": self.chunk_ns,
        }


def _strings(texts: list[str]) -> pa.Array:
    """Event texts as an Arrow string array; a lone surrogate (which no JSON parser gives) is stored marked rather
    than failing the row group."""
    try:
        return pa.array(texts, pa.string())
    except UnicodeEncodeError:
        return pa.array([t.encode("utf-8", "replace").decode() for t in texts], pa.string())


def _masked(f: Failure | None) -> str | None:
    """A failure's message with secrets masked (an error body may quote a key)."""
    return None if f is None else (redact(f.message) if f.message else f.message)


def _first_text(texts: list[str], events: int) -> int:
    """The index of the first event with text, -1 when none (or when the texts outnumber the stamps)."""
    for i, t in enumerate(texts):
        if t:
            return i if i < events else -1
    return -1


class StepRows:
    """Where a step's finished requests go on the hot path: a RowBatch, handed to the step's accumulator and the
    row sink at once every row group's worth (RowSink's limits) and when the step ends (`flush`)."""

    def __init__(
        self,
        acc: StepAccumulator,
        sink: RowSink,
        first: int,
        prompts: dict[int, Prompt],
        retok: Callable[[RequestRecord], int | None],
        counted: Callable[[bool], None],
    ) -> None:
        self.acc, self.sink, self.first, self.prompts = acc, sink, first, prompts
        self.retok, self.counted = retok, counted
        self.batch = RowBatch(acc.labels)

    def done(self, s: Sent) -> None:
        p, rec, batch = self.prompts.pop(s.index, None), s.record, self.batch
        batch.add(
            rec,
            index=s.index + self.first,
            warmup=s.warmup,
            sched_ns=s.sched_ns,
            isl_target=p.isl_target if p else None,
            osl_target=p.max_tokens if p else None,
            retok_tokens=self.retok(rec),
        )
        if len(batch) >= self.sink.max_rows or batch.chunks >= self.sink.max_chunks:
            self.flush()
        self.counted(rec.ok)

    def flush(self) -> None:
        if len(self.batch):
            batch, self.batch = self.batch, RowBatch(self.acc.labels)
            self.acc.add_batch(batch)
            self.sink.add_batch(batch)


__all__ = ["LABELS", "RowBatch", "StepRows"]
