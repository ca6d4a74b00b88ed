"""Engine /metrics scraped during a run on the client's clock (perf_counter_ns), so server-side series line up
with the requests. Which series to keep comes from the engine profile (`EngineProfile.metrics`)."""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import Callable
from typing import Any

import pyarrow as pa

from switchover.measure.prometheus import parse_metrics
from switchover.redaction import redact
from switchover.wire import EngineClient

SCRAPE_SCHEMA = pa.schema(
    [
        ("endpoint", pa.string()),
        ("t_ns", pa.int64()),  # perf_counter_ns when the scrape answer arrived (same clock as requests)
        ("sent_ns", pa.int64()),  # perf_counter_ns when the scrape was sent: the values were read in between
        ("wall", pa.float64()),
        ("intent", pa.string()),  # ttft, running, kv_usage, ... (engine profile intents)
        ("name", pa.string()),  # sample name as exposed (histograms: _bucket/_sum/_count)
        ("labels", pa.string()),  # JSON object
        ("value", pa.float64()),
    ]
)

HOLD_ROWS = 20_000  # scraped rows held before they are handed to the run's writer (a step may last hours)
PROCESS_RSS = "process_resident_memory_bytes"  # the Prometheus client libraries' process collector (Linux)
# a slow answer is late, not failed: on a loaded 2-core host vLLM CPU's /metrics took up to 2 s during a step, and a
# 2 s limit dropped those scrapes (a step then held 2-6 readings)
SCRAPE_TIMEOUT_S = 10.0
MASKED_TEXTS = 4096  # distinct series names and label sets whose masked form a scraper remembers
STOP_GRACE_S = 2.0  # how long stopping waits for a scrape in flight (the run's end is not held up to the limit above)


def wanted_series(engine: str | None, version: str | None = None) -> tuple[dict[str, str], str]:
    """(series name -> intent, metrics path) from the engine profile at the release served (None: the newest
    spellings); empty when there is no profile. vLLM before 0.9.2 serves its KV cache usage as
    vllm:gpu_cache_usage_perc, from 0.9.2 as vllm:kv_cache_usage_perc (the profile cites both)."""
    always = {PROCESS_RSS: "process_rss"}  # the engine process's memory, for drift over a soak (bench/soak.py)
    if not engine:
        return always, "/metrics"
    from switchover.engines import load_profile
    from switchover.errors import BadInput

    try:
        prof = load_profile(engine, version)
    except BadInput:
        return always, "/metrics"
    return {**always, **{spec.name: intent for intent, spec in prof.metrics.items()}}, prof.metrics_endpoint.path


class Scraper:
    """Polls one endpoint's metrics every `interval_s` until stopped, on a fixed schedule (a scrape's own latency
    does not stretch the period past max(interval, latency)); failures are counted, not raised."""

    def __init__(
        self,
        client: EngineClient,
        endpoint: str,
        engine: str | None,
        interval_s: float,
        on_rows: Callable[[list[dict[str, Any]]], None] | None = None,
        hold: int = HOLD_ROWS,
        version: str | None = None,
    ) -> None:
        self.client, self.endpoint, self.interval_s = client, endpoint, interval_s
        self.wanted, self.path = wanted_series(engine, version)
        self.rows: list[dict[str, Any]] = []
        self.on_rows, self.hold = on_rows, hold  # past `hold` rows, they go to `on_rows` (a writer) at once
        self.series: set[str] = set()  # names of the series kept so far (also those already taken)
        self.process_rss: float | None = None  # the engine's resident memory at the last scrape (bytes)
        self.failures = 0
        self.scrapes = 0
        # the engine's label values may quote anything: masked here, once per distinct text (they repeat every
        # scrape), so the rows need no redaction on their way to Parquet (that cost ~20 µs a string, and redacting
        # a step's rows at its end held the event loop for seconds at --scrape-interval 0.1)
        self._masked: dict[str, str] = {}
        self._endpoint_row = redact(endpoint)
        self._task: asyncio.Task[None] | None = None
        self._stop = asyncio.Event()

    async def once(self) -> None:
        sent = time.perf_counter_ns()
        res = await self.client.request("GET", self.path, timeout=max(self.interval_s, SCRAPE_TIMEOUT_S))
        t_ns, wall = time.perf_counter_ns(), time.time()
        self.scrapes += 1
        if res.failure or res.status != 200:
            self.failures += 1
            return
        errors: list[str] = []
        rows = parse_metrics(
            res.body.decode(errors="replace"), self.wanted, endpoint=self.endpoint, t_ns=t_ns, wall=wall, errors=errors
        )
        for r in rows:
            r["sent_ns"] = sent
            r["endpoint"] = self._endpoint_row
            r["name"], r["labels"] = self._mask(r["name"]), self._mask(r["labels"])
            if r["name"] == PROCESS_RSS:
                self.process_rss = r["value"]
        self.rows.extend(rows)
        if errors:  # a scrape that could not be read is a failed scrape, not an empty one
            self.failures += 1
        if self.on_rows is not None and len(self.rows) >= self.hold:  # a long step holds at most `hold` rows
            self.on_rows(self.take())

    def _mask(self, text: str) -> str:
        """`redact(text)`, remembered (at most MASKED_TEXTS distinct texts; then the memory starts over)."""
        got = self._masked.get(text)
        if got is None:
            if len(self._masked) >= MASKED_TEXTS:
                self._masked.clear()
            got = self._masked[text] = redact(text)
        return got

    def take(self) -> list[dict[str, Any]]:
        """The rows read since the last call (they leave the scraper: a long run writes them as it goes)."""
        rows, self.rows = self.rows, []
        for r in rows:
            self.series.add(r["name"])
        return rows

    async def _loop(self) -> None:
        loop = asyncio.get_running_loop()
        due = loop.time()
        while not self._stop.is_set():
            await self.once()
            # the next tick of the schedule; ticks a slow scrape overran are skipped, not caught up in a burst
            due = max(due + self.interval_s, loop.time())
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._stop.wait(), timeout=max(due - loop.time(), 0.0))

    def start(self) -> None:
        if self.wanted and self.interval_s > 0:
            self._task = asyncio.create_task(self._loop())

    async def stop(self) -> None:
        self._stop.set()
        if self._task is not None:
            try:
                # a scrape still waiting on a slow answer at the end of the run is dropped, not waited for
                await asyncio.wait_for(self._task, timeout=STOP_GRACE_S)
            except (TimeoutError, asyncio.CancelledError):
                self._task.cancel()

    def note(self) -> str:
        if set(self.wanted) == {PROCESS_RSS} and not self.series | {r["name"] for r in self.rows}:
            return f"{self.endpoint}: no engine profile metrics to scrape, and no {PROCESS_RSS} at {self.path}"
        kept = len(self.series | {r["name"] for r in self.rows})
        return f"{self.endpoint}: {self.scrapes} scrapes of {self.path}, {self.failures} failed, {kept} series kept"
