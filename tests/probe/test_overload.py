"""The overload probe's readings: the engine's waiting gauge (read by bench/scrape.py's parser) and TPOT (by
measure/timing.py), without an engine."""

from __future__ import annotations

import contextlib
import socket
import threading
import time

import pytest
from aiohttp import web

from switchover.engines.profile import RequestCapSource, load_profile
from switchover.errors import CheckFailed, Unreachable
from switchover.probe.overload import _slots, _tpot, _waiting, run_overload
from switchover.testing import FakeEngine
from switchover.testing.engine import stream_parts
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


# --- the engine's own slots: the profile's `request_cap:` at the release the engine reports (engines/server_facts) ---

TOTAL_SLOTS_URL = "https://github.com/ggml-org/llama.cpp/blob/b11434/tools/server/server-context.cpp"


def _llama_like(props: dict[str, object]) -> tuple[FakeEngine, list[str]]:
    """A llama-server look-alike: /v1/models, `props` at GET /props, 404 at /version, and a 2-token streamed answer;
    the list records every GET path asked."""
    gets: list[str] = []

    async def handle(req: web.Request) -> web.StreamResponse:
        if req.method == "GET":
            gets.append(req.path)
        if req.method == "GET" and req.path == "/v1/models":
            return web.json_response({"object": "list", "data": [{"id": "m", "object": "model"}]})
        if req.method == "GET" and req.path == "/props":
            return web.json_response(props)
        if req.method == "POST" and req.path == "/v1/completions":
            chunk = b'data: {"choices":[{"index":0,"text":"%s","finish_reason":null}]}\n\n'
            usage = b'data: {"choices":[],"usage":{"prompt_tokens":3,"completion_tokens":2,"total_tokens":5}}\n\n'
            return await stream_parts(req, [chunk % b"a", chunk % b"b", usage, b"data: [DONE]\n\n"])
        return web.json_response({"error": {"code": 404, "message": "File Not Found"}}, status=404)

    return FakeEngine(handler=handle), gets


async def test_llamacpp_b11434_reports_its_slots_from_props_total_slots_cited_at_a_release() -> None:
    """What users saw before (slots 4 for the test bed's b11434), now with where it was read."""
    engine, _ = _llama_like({"build_info": "b11434-0a1b2c3", "total_slots": 4})
    async with engine.running() as url:
        r = await run_overload(url, profile=load_profile("llamacpp"), max_concurrency=1, waves=1, timeout_s=5)
    assert r.slots == 4
    assert r.slots_source == f"/props total_slots ({TOTAL_SLOTS_URL})"


async def test_a_llamacpp_build_older_than_the_request_cap_data_gets_no_slots_and_says_why() -> None:
    """Before, /props total_slots was read at any build (the api block's slots_path held for no release range)."""
    engine, _ = _llama_like({"build_info": "b3000-0a1b2c3", "total_slots": 4})
    async with engine.running() as url:
        r = await run_overload(url, profile=load_profile("llamacpp"), max_concurrency=1, waves=1, timeout_s=5)
    assert r.slots is None
    assert r.slots_source is not None and r.slots_source.startswith("not read:")
    assert "b3000" in r.slots_source and ">=b3135" in r.slots_source


@pytest.mark.parametrize(
    ("props", "slots"),
    [
        ({"build_info": "b0-unknown", "total_slots": 2}, 2),  # built without its git history: any release read
        ({"total_slots": True}, None),  # a JSON bool is not a count
        ({"total_slots": 0}, None),  # not a cap
        ({"total_slots": "4"}, None),
        ({}, None),
    ],
)
async def test_the_slots_are_a_positive_whole_number_the_engine_reported(props: dict, slots: int | None) -> None:
    engine, _ = _llama_like(props)
    async with engine.running() as url, EngineClient(url) as client:
        got, source = await _slots(client, load_profile("llamacpp"))
    assert got == slots
    assert (source is not None) == (slots is not None)


async def test_an_engine_whose_profile_names_a_request_cap_gets_its_slots_without_an_engine_branch(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """SGLang given a request_cap entry (made up for the test) is read the same way; before, only the api block's
    slots_path/slots_field were read, so it got none."""
    entry = RequestCapSource(path="/props", field="total_slots", versions=">=0.4", source="https://example.test/x")
    fake = load_profile("sglang").model_copy(update={"request_cap": [entry]})
    engine, _ = _llama_like({"total_slots": 6})
    async with engine.running() as url, EngineClient(url) as client:
        assert await _slots(client, fake) == (6, "/props total_slots (https://example.test/x)")


async def test_an_engine_without_request_cap_data_is_not_asked_for_one() -> None:
    engine, gets = _llama_like({"total_slots": 4})
    async with engine.running() as url:
        r = await run_overload(url, profile=load_profile("vllm"), max_concurrency=1, waves=1, timeout_s=5)
        s = await run_overload(url, max_concurrency=1, waves=1, timeout_s=5)
    assert (r.slots, r.slots_source, s.slots, s.slots_source) == (None, None, None, None)
    assert "/props" not in gets
