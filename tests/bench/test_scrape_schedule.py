"""The /metrics scraper's schedule: a slow answer still counts, and a scrape's latency does not stretch the period."""

from __future__ import annotations

import asyncio
import time

from switchover.bench.scrape import SCRAPE_TIMEOUT_S, Scraper
from switchover.wire.client import HttpResult
from switchover.wire.records import Failure, FailureKind

METRICS = "vllm:num_requests_running 2.0\nvllm:num_requests_waiting 3.0\n"


class _Slow:
    """A fake engine whose /metrics answers after `latency_s` (a timeout when the caller's limit is shorter)."""

    def __init__(self, latency_s: float, sleep: bool = True) -> None:
        self.latency_s, self.sleep = latency_s, sleep
        self.timeouts: list[float | None] = []

    async def request(self, method: str, path: str, timeout: float | None = None) -> HttpResult:
        self.timeouts.append(timeout)
        if timeout is not None and timeout < self.latency_s:
            return HttpResult(None, b"", timeout * 1e3, Failure(FailureKind.FIRST_BYTE_TIMEOUT, "timed out"))
        if self.sleep:
            await asyncio.sleep(self.latency_s)
        return HttpResult(200, METRICS.encode(), self.latency_s * 1e3)


async def test_a_scrape_answered_after_2_5_s_is_read_not_failed() -> None:
    # before: the limit was max(interval, 2 s), so a loaded vLLM CPU's late /metrics answer was a failed scrape
    client = _Slow(2.5, sleep=False)
    s = Scraper(client, "new", "vllm", 0.1)  # type: ignore[arg-type]
    await s.once()
    assert s.failures == 0 and {r["intent"] for r in s.rows} == {"running", "waiting"}
    assert client.timeouts == [SCRAPE_TIMEOUT_S]


async def test_each_row_carries_when_its_scrape_was_sent_and_when_it_arrived() -> None:
    s = Scraper(_Slow(0.05), "new", "vllm", 0.1)  # type: ignore[arg-type]
    before = time.perf_counter_ns()
    await s.once()
    (sent,) = {r["sent_ns"] for r in s.rows}
    (arrived,) = {r["t_ns"] for r in s.rows}
    assert before <= sent and arrived - sent >= 40_000_000  # the 50 ms the answer took lies between the two


async def test_a_scrape_that_takes_most_of_the_interval_does_not_stretch_the_period() -> None:
    # before: the loop slept a whole interval after each answer, so 0.18 s answers at 0.2 s made a 0.38 s period
    # (about 5 scrapes in 2 s); on the schedule they start every 0.2 s (about 10)
    s = Scraper(_Slow(0.18), "new", "vllm", 0.2)  # type: ignore[arg-type]
    s.start()
    await asyncio.sleep(2.0)
    await s.stop()
    assert s.scrapes >= 8, s.scrapes


async def test_a_scrape_slower_than_the_interval_is_followed_at_once_not_by_a_burst() -> None:
    s = Scraper(_Slow(0.3), "new", "vllm", 0.1)  # type: ignore[arg-type]
    s.start()
    await asyncio.sleep(1.0)
    await s.stop()
    assert 3 <= s.scrapes <= 5, s.scrapes  # one every 0.3 s: the ticks it overran are skipped


async def test_stopping_does_not_wait_for_a_slow_scrape_in_flight() -> None:
    s = Scraper(_Slow(8.0), "new", "vllm", 0.1)  # type: ignore[arg-type]
    s.start()
    await asyncio.sleep(0.1)
    t0 = time.monotonic()
    await s.stop()
    assert time.monotonic() - t0 < 3.0  # the 8 s answer is dropped after the stop grace, not waited for


class _Secret:
    """An engine whose label values quote a key (a model path with a token in it, say)."""

    async def request(self, method: str, path: str, timeout: float | None = None) -> HttpResult:
        text = 'vllm:num_requests_running{model_name="/m?token=sk-abcdefabcdefabcdef12"} 2.0\n'
        text += "vllm:num_requests_waiting 1\n"
        return HttpResult(200, text.encode(), 1.0)


async def test_label_values_are_masked_once_per_distinct_text_so_writing_the_rows_needs_no_redaction(
    monkeypatch,
) -> None:
    from switchover.bench import scrape

    calls: list[str] = []
    real = scrape.redact
    monkeypatch.setattr(scrape, "redact", lambda text: calls.append(text) or real(text))
    s = Scraper(_Secret(), "new", "vllm", 0.1)  # type: ignore[arg-type]
    for _ in range(50):
        await s.once()
    rows = s.take()
    assert len(rows) == 100 and not any("sk-abcdef" in r["labels"] for r in rows)
    assert len(calls) <= 1 + 4  # the endpoint, then each distinct name and label text once, not once a row
