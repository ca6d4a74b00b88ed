"""The overload probe's readings: the engine's waiting gauge (read by bench/scrape.py's parser) and TPOT (by
measure/timing.py), without an engine."""

from __future__ import annotations

import contextlib
import socket
import threading
import time

import pytest
from aiohttp import web

from switchover.errors import CheckFailed, Unreachable
from switchover.probe.overload import _tpot, _waiting, run_overload
from switchover.testing import FakeEngine
from switchover.wire import EngineClient
from switchover.wire.records import RequestRecord, Usage
from tests.loopback import tcp_server

METRICS = """# HELP vllm:num_requests_waiting Number of requests waiting.
# TYPE vllm:num_requests_waiting gauge
vllm:num_requests_waiting{engine="0",model_name="m"} 3.0
vllm:num_requests_waiting{engine="1",model_name="m"} 2.0
# HELP vllm:num_requests_waiting_time_seconds Time waited.
# TYPE vllm:num_requests_waiting_time_seconds histogram
vllm:num_requests_waiting_time_seconds_bucket{le="+Inf"} 9.0
vllm:num_requests_waiting_time_seconds_count 9.0
vllm:num_requests_waiting_time_seconds_sum 40.0
"""


def _engine(body: str, path: str) -> FakeEngine:
    """A fake engine exposing `body` as its Prometheus metrics at `path` (404 elsewhere)."""

    async def metrics(req: web.Request) -> web.Response:
        if req.path != path:
            return web.json_response({"error": {"message": "not found"}}, status=404)
        return web.Response(text=body, content_type="text/plain")

    return FakeEngine(handler=metrics)


async def test_waiting_gauge_sums_its_series_and_nothing_with_a_longer_name() -> None:
    async with _engine(METRICS, "/prom").running() as url, EngineClient(url) as c:
        assert await _waiting(c, "vllm:num_requests_waiting", "/prom") == 5.0
        assert await _waiting(c, "vllm:num_requests_running", "/prom") is None  # not exposed: not measured
        assert await _waiting(c, "vllm:num_requests_waiting", "/metrics") is None  # 404: not measured
        assert await _waiting(c, None) is None


def test_tpot_is_missing_below_two_tokens_and_ends_at_the_last_event_with_choices() -> None:
    rec = RequestRecord(api="completions", stream=True, model="m", started_wall=0.0, send_ns=0)
    rec.chunk_ns, rec.chunk_text, rec.chunk_choice = [10_000_000, 20_000_000, 40_000_000], ["a", "b", ""], [0, 0, 0]
    rec.end_ns = 90_000_000  # [DONE] and usage came later: not part of E2E
    rec.usage = Usage(prompt_tokens=1, completion_tokens=4)
    assert _tpot(rec) == (40 - 10) / 3
    rec.usage = Usage(prompt_tokens=1, completion_tokens=1)
    assert _tpot(rec) is None
    rec.usage = Usage(prompt_tokens=1, completion_tokens=3)
    rec.chunk_ns = [40_000_000] * 3  # every token in one read: the gaps were not seen, TPOT is not 0
    assert _tpot(rec) is None


# --- nothing answering is not a verdict; the whole run is bounded (issues 22 and 26) -------------------------


def _closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _raw_server(answer: bytes | None) -> contextlib.AbstractContextManager[str]:
    """A loopback port that accepts and then sends `answer` and closes (None: sends nothing, ever)."""

    def reply(conn: socket.socket, _stop: threading.Event) -> None:
        with contextlib.suppress(OSError), conn:
            conn.recv(65536)
            conn.sendall(answer or b"")

    return tcp_server(None if answer is None else reply)


async def test_nothing_listening_is_unreachable_not_a_neither_verdict() -> None:
    """It printed 'NEITHER ... raise --max-concurrency' and exited 0."""
    t0 = time.monotonic()
    with pytest.raises(Unreachable, match="nothing was measured"):
        await run_overload(f"http://127.0.0.1:{_closed_port()}", max_concurrency=2, waves=1, timeout_s=2)
    assert time.monotonic() - t0 < 3


async def test_tls_against_plain_http_is_unreachable() -> None:
    async with FakeEngine().running() as url:
        with pytest.raises(Unreachable, match="nothing was measured"):
            await run_overload(url.replace("http://", "https://"), max_concurrency=2, waves=1, timeout_s=2)


async def test_a_server_speaking_another_protocol_is_unreachable() -> None:
    """What a TLS server sends a plain-HTTP client: an alert record, then it closes."""
    with _raw_server(b"\x15\x03\x01\x00\x02\x02\x46") as url, pytest.raises(Unreachable, match="nothing"):
        await run_overload(url, max_concurrency=2, waves=1, timeout_s=2)


async def test_a_port_that_never_answers_is_unreachable_within_the_timeout() -> None:
    """It ran past 15 minutes: every request waited its own timeout, level after level."""
    with _raw_server(None) as url:
        t0 = time.monotonic()
        with pytest.raises(Unreachable, match=r"within 1 s"):
            await run_overload(url, max_concurrency=16, waves=2, timeout_s=1)
        assert time.monotonic() - t0 < 3


async def test_every_request_refused_with_an_error_is_a_failed_check() -> None:
    engine = FakeEngine()
    engine.script(weights={"status:400": 1.0})
    async with engine.running() as url:
        with pytest.raises(CheckFailed, match="every request at concurrency 1 failed"):
            await run_overload(url, max_concurrency=2, waves=1, timeout_s=2)


async def test_the_whole_run_stops_at_its_deadline_and_says_so() -> None:
    async with FakeEngine(delay_ms=400).running() as url:
        t0 = time.monotonic()
        report = await run_overload(url, max_concurrency=64, waves=2, timeout_s=10, max_run_s=1.5)
        took = time.monotonic() - t0
    assert took < 4
    assert report.stopped and "--max-run-s" in report.stopped
    assert report.steps[0].ok == 2 and not report.steps[0].cut
    assert report.verdict != "neither" or "raise --max-run-s" in report.reason


async def test_an_engine_still_loading_is_not_read_as_rejecting_from_concurrency_1() -> None:
    """llama-server answers 503 'Loading model' to everything while it loads: that was 'REJECTS from 1', exit 0."""

    async def loading(req: web.Request) -> web.Response:
        return web.json_response(
            {"error": {"code": 503, "message": "Loading model", "type": "unavailable_error"}}, status=503
        )

    async with FakeEngine(handler=loading).running() as url:
        with pytest.raises(CheckFailed, match=r"still loading: llama\.cpp"):
            await run_overload(url, max_concurrency=2, waves=1, timeout_s=2)
