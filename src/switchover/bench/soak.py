"""Soak runs: a long step measured in windows (drift over time), checkpointed so a crash loses at most one
checkpoint interval and `bench --resume RUN` carries on.

- Rows go to `requests/part-NNNNN.parquet`, one part closed per checkpoint (the open part is hidden under a
  temporary name, so readers of the folder never see a file without its footer).
- Each endpoint's step is cut into windows (`--window`, default one hour) by request completion time; each window
  is summarised by its own accumulator, with the client's RSS and the engine's (its /metrics
  `process_resident_memory_bytes`, where it exposes one) when it closes.
- The drift table compares the last full window with the first on TTFT/TPOT p50/p99, req/s, error rate and both
  memories; a change beyond `DRIFT_PCT` is flagged.
"""

from __future__ import annotations

import os
import resource
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pyarrow as pa

from switchover.atomicfile import is_temp
from switchover.bench.accumulate import StepAccumulator
from switchover.bench.scrape import PROCESS_RSS as ENGINE_RSS
from switchover.evidence.bench_findings import DriftRow, Soak, Window
from switchover.runs import RecordWriter

DRIFT_PCT = 10.0  # a change of more than 10% between the first and the last window is flagged


def client_rss_mb() -> float:
    """This process's resident memory now (Linux /proc), else its peak (getrusage)."""
    try:
        with open("/proc/self/statm") as f:
            return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE") / 2**20
    except (OSError, ValueError, IndexError):
        return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


class PartWriter:
    """Rows to `<dir>/part-NNNNN.parquet`, one part per checkpoint, each written by runs.RecordWriter (hidden under
    a temporary name until it is renamed into place whole): `rotate()` closes the open part so everything up to the
    checkpoint is readable even if the process dies next."""

    def __init__(
        self,
        folder: Path,
        schema: pa.Schema,
        first_part: int = 0,
        statistics: bool | list[str] = True,
        dictionary: bool | list[str] = True,
    ) -> None:
        self.folder = folder
        self.folder.mkdir(exist_ok=True)
        self.schema = schema
        self.statistics, self.dictionary = statistics, dictionary
        self.part = first_part
        self.rows = 0
        self._writer: RecordWriter | None = None
        for stale in self.folder.glob(".part-*"):  # rows after the last checkpoint of a crashed run
            if is_temp(stale):
                stale.unlink()

    def append(self, rows: list[Any]) -> None:
        if not rows:
            return
        if self._writer is None:  # rows come masked (bench/rows.RowSink) or hold no free text (scrapes)
            self._writer = RecordWriter(
                self.folder / f"part-{self.part:05d}.parquet",
                self.schema,
                redacted=False,
                statistics=self.statistics,
                dictionary=self.dictionary,
            )
        self._writer.append(rows)
        self.rows += len(rows)

    def rotate(self) -> None:
        """Close the open part, if any rows went to it."""
        if self._writer is None:
            return
        self._writer.close()
        self._writer = None
        self.part += 1

    def close(self) -> None:
        self.rotate()


class Windows:
    """The open window of each endpoint's running step; closed ones become `Window` rows."""

    def __init__(self, soak: Soak, seed: int, engine_rss: Callable[[str], float | None] | None = None) -> None:
        self.soak = soak
        self.seed = seed
        self.engine_rss = engine_rss or (lambda endpoint: None)  # bytes, from the last /metrics scrape
        self.open: dict[str, tuple[int, StepAccumulator]] = {}
        self.t0_ns: dict[str, int] = {}
        self.wall0: dict[str, float] = {}

    def start(
        self,
        endpoint: str,
        t0_ns: int,
        wall: float,
        labels: dict[str, Any],
        first_index: int = 0,
        acc: StepAccumulator | None = None,
    ) -> None:
        self.t0_ns[endpoint], self.wall0[endpoint] = t0_ns, wall
        self.open[endpoint] = (first_index, acc or StepAccumulator(labels=labels, seed=self.seed))

    def add(self, endpoint: str, row: dict[str, Any], now_ns: int) -> None:
        """A finished request; it belongs to the window its completion falls in."""
        self.roll(endpoint, now_ns)
        self.open[endpoint][1].add(row)

    def roll(self, endpoint: str, now_ns: int) -> None:
        """Close the endpoint's window when `now_ns` is past it (also called by the checkpoint timer)."""
        if endpoint not in self.open:
            return
        index, acc = self.open[endpoint]
        width = int(self.soak.window_s * 1e9)
        at = (now_ns - self.t0_ns[endpoint]) // width
        if at <= index:
            return
        self.close(endpoint, index, acc, complete=True)
        for skipped in range(index + 1, int(at)):  # whole windows in which no request finished: a stall, shown
            self.close(endpoint, skipped, StepAccumulator(labels=dict(acc.labels), seed=self.seed), complete=True)
        self.open[endpoint] = (int(at), StepAccumulator(labels=dict(acc.labels), seed=self.seed))

    def close(
        self, endpoint: str, index: int, acc: StepAccumulator, *, complete: bool, end_ns: int | None = None
    ) -> None:
        """A window becomes a `Window` row; a whole one also when no request finished in it (0 requests is a
        measurement: the endpoint stalled), a partial last one only when it has requests."""
        if not acc.rows and not complete:
            return
        width = self.soak.window_s
        start = index * width
        end = start + width if complete or end_ns is None else (end_ns - self.t0_ns[endpoint]) / 1e9
        rss = self.engine_rss(endpoint)
        self.soak.windows.append(
            Window(
                endpoint=endpoint,
                index=index,
                start_s=start,
                end_s=end,
                start_wall=self.wall0[endpoint] + start,
                summary=acc.summary(),
                client_rss_mb=client_rss_mb(),
                engine_rss_mb=None if rss is None else rss / 2**20,
                partial=not complete,
            )
        )

    def finish(self, endpoint: str, end_ns: int) -> None:
        """The step ended: its last, partial window closes too."""
        if endpoint in self.open:
            index, acc = self.open.pop(endpoint)
            self.close(endpoint, index, acc, complete=False, end_ns=end_ns)


def _pct(first: float | None, last: float | None) -> float | None:
    if first is None or last is None or first == 0:
        return None
    return (last - first) / first * 100


def drift_table(windows: list[Window], window_s: float) -> list[DriftRow]:
    """First vs last full window per endpoint: latency tails, throughput, errors, client and engine memory."""
    out: list[DriftRow] = []
    for endpoint in dict.fromkeys(w.endpoint for w in windows):
        full = [w for w in windows if w.endpoint == endpoint and w.end_s - w.start_s >= window_s * 0.999]
        if len(full) < 2:
            out.append(
                DriftRow(
                    endpoint=endpoint,
                    metric="all",
                    first=None,
                    last=None,
                    change_pct=None,
                    flagged=False,
                    note=f"{len(full)} full window(s): drift needs two",
                )
            )
            continue
        a, b = full[0], full[-1]
        pairs: list[tuple[str, float | None, float | None]] = []
        for name, attr in (("TTFT", "ttft_ms"), ("TPOT", "tpot_ms")):
            for stat in ("p50", "p99"):
                da, db = getattr(a.summary, attr), getattr(b.summary, attr)
                pairs.append((f"{name} {stat} ms", da.get(stat) if da else None, db.get(stat) if db else None))
        pairs.append(("req/s", a.summary.req_per_s, b.summary.req_per_s))
        pairs.append(("requests", float(a.summary.requests), float(b.summary.requests)))  # 0 in a stalled window
        pairs.append(("error rate", a.summary.error_rate, b.summary.error_rate))
        pairs.append(("client RSS MB", a.client_rss_mb, b.client_rss_mb))
        pairs.append(("engine RSS MB", a.engine_rss_mb, b.engine_rss_mb))
        for metric, x, y in pairs:
            change = _pct(x, y)
            note = ""
            if metric == "engine RSS MB" and x is None:
                note = f"not measured: no {ENGINE_RSS} scraped from the engine's /metrics (or --scrape-interval 0)"
            elif metric == "error rate":  # a rate near 0 makes a percentage meaningless: compare the rates
                change = None if x is None or y is None else (y - x) * 100
                note = "change in percentage points"
            flagged = change is not None and abs(change) > DRIFT_PCT
            if metric in ("req/s", "requests"):
                flagged = change is not None and change < -DRIFT_PCT
            out.append(
                DriftRow(
                    endpoint=endpoint, metric=metric, first=x, last=y, change_pct=change, flagged=flagged, note=note
                )
            )
    return out


__all__ = [
    "DRIFT_PCT",
    "ENGINE_RSS",
    "DriftRow",
    "PartWriter",
    "Soak",
    "Window",
    "Windows",
    "client_rss_mb",
    "drift_table",
]
