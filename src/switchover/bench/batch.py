"""Finished requests of one step held as columns, so the hot path appends a few values per request and the row
group's Parquet table and the step's statistics are built once per few thousand requests (vectorised), not a row
dict, a metrics object and a list of gaps per request (a third of a 40,000-request run's CPU before)."""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import numpy as np
import pyarrow as pa

from switchover.bench.rows import COLUMNS, ROW_SCHEMA
from switchover.redaction import redact
from switchover.wire import RequestRecord

if TYPE_CHECKING:
    from switchover.bench.accumulate import StepAccumulator
    from switchover.bench.rows import RowSink
    from switchover.bench.scheduler import Sent
    from switchover.bench.workload import Prompt

LABELS = ("endpoint", "step", "repeat", "concurrency", "rate", "bucket")
_PER_ROW = tuple(c for c in COLUMNS if c not in LABELS and c not in ("chunk_ns", "chunk_text"))


class RowBatch:
    """Rows of one step (its labels shared) as columns; `add` per finished request, `table()` for Parquet."""

    __slots__ = ("_ns", "chunk_ns", "chunk_text", "cols", "first", "labels", "offsets")

    def __init__(self, labels: dict[str, Any]) -> None:
        self.labels = {k: labels.get(k) for k in LABELS}
        self.cols: dict[str, list[Any]] = {c: [] for c in _PER_ROW}
        self.chunk_ns: list[int] = []  # every row's event times, one after the other
        self.chunk_text: list[str] = []
        self.offsets: list[int] = [0]  # row i's events are chunk_ns[offsets[i]:offsets[i + 1]]
        self.first: list[int] = []  # row i's first event with text (the first token), -1 when none
        self._ns: np.ndarray | None = None  # chunk_ns as numpy, made once for the statistics and the table

    def __len__(self) -> int:
        return len(self.first)

    @property
    def chunks(self) -> int:
        return len(self.chunk_ns)

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
        c = self.cols
        usage, failure = rec.usage, rec.failure
        c["isl_target"].append(isl_target)
        c["osl_target"].append(osl_target)
        c["index"].append(index)
        c["warmup"].append(warmup)
        c["sched_ns"].append(sched_ns)
        c["send_ns"].append(rec.send_ns)
        c["headers_ns"].append(rec.headers_ns)
        c["first_byte_ns"].append(rec.first_byte_ns)
        c["end_ns"].append(rec.end_ns)
        c["usage_ns"].append(rec.usage_ns)
        c["started_wall"].append(rec.started_wall)
        c["status"].append(rec.status)
        c["finish_reason"].append(rec.finish_reasons.get(0))
        c["prompt_tokens"].append(usage.prompt_tokens if usage else None)
        c["completion_tokens"].append(usage.completion_tokens if usage else None)
        c["cached_tokens"].append(usage.cached_tokens if usage else None)
        c["retok_tokens"].append(retok_tokens)
        c["done_seen"].append(rec.done_seen)
        c["failure_kind"].append(failure.kind.value if failure else None)
        msg = failure.message if failure else None
        c["failure_message"].append(redact(msg) if msg else msg)  # an error body may quote a key: masked
        c["output_text"].append(rec.texts.get(0, ""))
        ns, texts = rec.chunk_ns, rec.chunk_text
        self.chunk_ns += ns
        self.chunk_text += texts
        self.offsets.append(len(self.chunk_ns))
        first = -1
        for i, t in enumerate(texts):
            if t:
                first = i if i < len(ns) else -1
                break
        self.first.append(first)

    def table(self) -> pa.Table:
        """The rows as one Parquet-ready table (ROW_SCHEMA)."""
        n = len(self)
        arrays: list[pa.Array] = []
        offsets = pa.array(self.offsets, pa.int32())
        for f in ROW_SCHEMA:
            if f.name in self.labels:
                arrays.append(pa.array([self.labels[f.name]] * n, f.type))
            elif f.name == "chunk_ns":
                arrays.append(pa.ListArray.from_arrays(offsets, pa.array(self._chunk_ns(), pa.int64())))
            elif f.name == "chunk_text":
                arrays.append(pa.ListArray.from_arrays(offsets, pa.array(self.chunk_text, pa.string())))
            else:
                arrays.append(pa.array(self.cols[f.name], f.type))
        return pa.Table.from_arrays(arrays, schema=ROW_SCHEMA)

    def row(self, i: int) -> dict[str, Any]:
        """Row i as a dict (the per-row form: bench/rows.py)."""
        a, b = self.offsets[i], self.offsets[i + 1]
        return {
            **self.labels,
            **{k: v[i] for k, v in self.cols.items()},
            "chunk_ns": self.chunk_ns[a:b],
            "chunk_text": self.chunk_text[a:b],
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
            "chunk_ns": self._chunk_ns(),
        }

    def _chunk_ns(self) -> np.ndarray:
        """Every row's event times as one int64 array (converted once: a flush needs it twice)."""
        if self._ns is None or len(self._ns) != len(self.chunk_ns):
            self._ns = np.array(self.chunk_ns, dtype=np.int64)
            self._ns.flags.writeable = False  # shared by the statistics and the Parquet table
        return self._ns


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
