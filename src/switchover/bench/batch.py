"""Finished requests of one step held as columns, so the hot path appends a few values per request and the row
group's Parquet table and the step's statistics are built once per few thousand requests (vectorised), not a row
dict, a metrics object and a list of gaps per request (a third of a 40,000-request run's CPU before)."""

from __future__ import annotations

from collections.abc import Callable
from itertools import accumulate, chain
from typing import TYPE_CHECKING, Any

import numpy as np
import pyarrow as pa

from switchover.bench.rows import COLUMNS, ROW_SCHEMA
from switchover.redaction import redact
from switchover.wire import Failure, RequestRecord

if TYPE_CHECKING:
    from switchover.bench.accumulate import StepAccumulator
    from switchover.bench.rows import RowSink
    from switchover.bench.scheduler import Sent
    from switchover.bench.workload import Prompt

LABELS = ("endpoint", "step", "repeat", "concurrency", "rate", "bucket")
_PER_ROW = tuple(c for c in COLUMNS if c not in LABELS and c not in ("chunk_ns", "chunk_text"))


class RowBatch:
    """Rows of one step (its labels shared): `add` keeps each finished request's record and a tuple of its labels,
    and the columns (`cols`, the event lists, `table()`, `arrays()`) are built once per batch by comprehensions over
    them, not value by value on the hot path."""

    __slots__ = ("_built", "_chunks", "labels", "meta", "recs")

    def __init__(self, labels: dict[str, Any]) -> None:
        self.labels = {k: labels.get(k) for k in LABELS}
        self.recs: list[RequestRecord] = []
        self.meta: list[tuple[int, bool, int | None, int | None, int | None, int | None]] = []
        self._chunks = 0
        self._built: _Columns | None = None

    def __len__(self) -> int:
        return len(self.recs)

    @property
    def chunks(self) -> int:
        return self._chunks

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
        """One finished request (its record is final: nothing changes it after it ends)."""
        self.recs.append(rec)
        self.meta.append((index, warmup, sched_ns, isl_target, osl_target, retok_tokens))
        self._chunks += len(rec.chunk_ns)
        self._built = None

    @property
    def cols(self) -> dict[str, list[Any]]:
        """The per-row columns (the values `rows.row_from_record` gives; failure messages masked)."""
        return self._columns().cols

    @property
    def chunk_ns(self) -> np.ndarray:
        """Every row's event times, one after the other (row i's are chunk_ns[offsets[i]:offsets[i + 1]]), int64
        and read-only (the statistics and the Parquet table share it)."""
        return self._columns().chunk_ns

    @property
    def chunk_text(self) -> list[str]:
        return self._columns().chunk_text

    @property
    def offsets(self) -> list[int]:
        return self._columns().offsets

    @property
    def first(self) -> list[int]:
        """Row i's first event with text (the first token), -1 when none."""
        return self._columns().first

    def _columns(self) -> _Columns:
        if self._built is None:
            self._built = _Columns(self.recs, self.meta)
        return self._built

    def table(self) -> pa.Table:
        """The rows as one Parquet-ready table (ROW_SCHEMA)."""
        n, built = len(self), self._columns()
        arrays: list[pa.Array] = []
        offsets = pa.array(built.offsets, pa.int32())
        for f in ROW_SCHEMA:
            if f.name in self.labels:
                arrays.append(pa.array([self.labels[f.name]] * n, f.type))
            elif f.name == "chunk_ns":
                arrays.append(pa.ListArray.from_arrays(offsets, pa.array(built.chunk_ns, pa.int64())))
            elif f.name == "chunk_text":
                arrays.append(pa.ListArray.from_arrays(offsets, pa.array(built.chunk_text, pa.string())))
            else:
                arrays.append(pa.array(built.cols[f.name], f.type))
        return pa.Table.from_arrays(arrays, schema=ROW_SCHEMA)

    def row(self, i: int) -> dict[str, Any]:
        """Row i as a dict (the per-row form: bench/rows.py)."""
        built = self._columns()
        a, b = built.offsets[i], built.offsets[i + 1]
        return {
            **self.labels,
            **{k: v[i] for k, v in built.cols.items()},
            "chunk_ns": built.chunk_ns[a:b].tolist(),
            "chunk_text": built.chunk_text[a:b],
        }

    def arrays(self) -> dict[str, np.ndarray]:
        """The columns the statistics need, as numpy arrays (nulls as masks: `*_ok`)."""
        built = self._columns()
        c = built.cols
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
            "first": np.array(built.first, dtype=np.int64),
            "offsets": np.array(built.offsets, dtype=np.int64),
            "chunk_ns": built.chunk_ns,
        }


class _Columns:
    """A batch's rows as columns, each built in one pass over the records."""

    __slots__ = ("chunk_ns", "chunk_text", "cols", "first", "offsets")

    def __init__(
        self, recs: list[RequestRecord], meta: list[tuple[int, bool, int | None, int | None, int | None, int | None]]
    ) -> None:
        usages = [r.usage for r in recs]
        failures = [r.failure for r in recs]
        index, warmup, sched, isl, osl, retok = (list(c) for c in zip(*meta, strict=True)) if meta else ([],) * 6
        self.cols: dict[str, list[Any]] = {
            "isl_target": isl,
            "osl_target": osl,
            "index": index,
            "warmup": warmup,
            "sched_ns": sched,
            "send_ns": [r.send_ns for r in recs],
            "headers_ns": [r.headers_ns for r in recs],
            "first_byte_ns": [r.first_byte_ns for r in recs],
            "end_ns": [r.end_ns for r in recs],
            "usage_ns": [r.usage_ns for r in recs],
            "started_wall": [r.started_wall for r in recs],
            "status": [r.status for r in recs],
            "finish_reason": [r.finish_reasons.get(0) for r in recs],
            "prompt_tokens": [u.prompt_tokens if u else None for u in usages],
            "completion_tokens": [u.completion_tokens if u else None for u in usages],
            "cached_tokens": [u.cached_tokens if u else None for u in usages],
            "retok_tokens": retok,
            "done_seen": [r.done_seen for r in recs],
            "failure_kind": [f.kind.value if f else None for f in failures],
            "failure_message": [_masked(f) for f in failures],
            "output_text": [r.texts.get(0, "") for r in recs],
        }
        self.offsets: list[int] = [0, *accumulate(len(r.chunk_ns) for r in recs)]
        stamps = chain.from_iterable(r.chunk_ns for r in recs)
        self.chunk_ns = np.fromiter(stamps, dtype=np.int64, count=self.offsets[-1])
        self.chunk_ns.flags.writeable = False
        self.chunk_text: list[str] = list(chain.from_iterable(r.chunk_text for r in recs))
        self.first = [_first_text(r.chunk_text, len(r.chunk_ns)) for r in recs]


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
