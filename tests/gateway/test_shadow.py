"""The shadow mirrors through the wire client: timed by the bench's formulas, bounded, labelled when it fails."""

from __future__ import annotations

import asyncio
from typing import Any

import orjson
import pytest
from aiohttp import web

from switchover.bench.rows import row_from_record
from switchover.bench.stats import request_metrics
from switchover.config.gateway import ShadowConfig
from switchover.gateway.shadow import Shadow, shadow_body
from switchover.ledger_record import ShadowResult
from switchover.testbed.processes import free_port
from switchover.testing import FakeEngine, await_until, chunk, usage_chunk
from switchover.testing.engine import stream_parts
from switchover.wire import EngineClient

CHAT = "/v1/chat/completions"
JSON = {"Content-Type": "application/json"}


def body(max_tokens: int = 4) -> bytes:
    return shadow_body(
        {"model": "m", "messages": [{"role": "user", "content": "hi"}], "max_tokens": max_tokens}, None, None
    )


async def mirror(
    url: str,
    headers: dict[str, str] | None = None,
    *,
    timeout_ms: float = 10_000,
    payload: bytes | None = None,
    shadow: Shadow | None = None,
) -> ShadowResult:
    sh = shadow or Shadow()
    try:
        task = sh.start(
            ShadowConfig(percent=100, timeout_ms=timeout_ms),
            url,
            "new",
            payload or body(),
            {**JSON, **(headers or {})},
            1.0,
        )
        assert isinstance(task, asyncio.Future)
        return await task
    finally:
        if shadow is None:
            await sh.close()


async def test_a_mirror_is_timed_by_the_bench_formulas() -> None:
    up = FakeEngine("new")
    up.script(sequence=["drip:40", "drip:40"])  # 4 tokens, 40 ms apart, then the finish event
    async with up.running() as base:
        r = await mirror(base + CHAT)
        async with EngineClient(base) as c:  # the same stream measured by bench's client and formulas
            rec = await c.generate("chat", {**orjson.loads(body()), "stream": True}, include_usage=True)
    assert (r.status, r.error, r.completion_tokens, r.finish_reason, r.dropped) == (200, None, 4, "length", False)
    assert r.ttft_ms is not None and r.e2e_ms is not None and r.tpot_ms is not None
    assert r.tpot_ms == pytest.approx((r.e2e_ms - r.ttft_ms) / (4 - 1), rel=1e-12)  # (E2E - TTFT)/(N - 1)
    assert r.e2e_ms - r.ttft_ms >= 4 * 40 * 0.9  # four gaps between the first token and the finish event
    m = request_metrics(row_from_record(rec))
    assert m.tpot_ms is not None and r.tpot_ms == pytest.approx(m.tpot_ms, rel=0.25)


async def test_e2e_ends_at_the_last_event_with_choices_not_at_usage_or_done() -> None:
    server = await FakeEngine().start()

    async def h(req: web.Request) -> web.StreamResponse:
        return await stream_parts(
            req, [chunk("a"), 0.05, chunk("b", "stop"), 0.4, usage_chunk(3, 2), b"data: [DONE]\n\n"]
        )

    server.handler = h
    try:
        r = await mirror(server.url + CHAT)
    finally:
        await server.stop()
    assert r.error is None and r.e2e_ms is not None and r.ttft_ms is not None and r.tpot_ms is not None
    assert r.e2e_ms < 300  # the finish event came ~50 ms in; usage and [DONE] 400 ms later
    assert r.tpot_ms == pytest.approx(r.e2e_ms - r.ttft_ms)  # N = 2


async def test_a_mirror_sends_exactly_the_given_headers_and_body() -> None:
    server = await FakeEngine().start()
    seen: dict[str, Any] = {}

    async def h(req: web.Request) -> web.StreamResponse:
        seen["body"], seen["target"] = await req.read(), req.path_qs
        return await stream_parts(req, [chunk("a", "stop"), b"data: [DONE]\n\n"])

    server.handler = h
    payload = body()
    try:
        r = await mirror(
            server.url + CHAT + "?tenant=a", {"Authorization": "Bearer new-key", "X-Trace": "t1"}, payload=payload
        )
    finally:
        await server.stop()
    assert r.error is None and seen["body"] == payload and seen["target"] == CHAT + "?tenant=a"
    assert {k.lower() for k in server.last_headers} == {
        "content-type",
        "authorization",
        "x-trace",
        "host",
        "content-length",
    }
    assert server.last_headers["Authorization"] == "Bearer new-key"


@pytest.mark.parametrize(
    ("fault", "label"),
    [
        ("status:503", "status_503"),
        ("malformed:1", "malformed"),
        ("error_event:1", "stream_error"),
        ("truncate:1", "truncated"),
        ("die_mid:1", "disconnected"),
        ("refuse", "disconnected"),
        ("hang:5", "timeout"),
    ],
)
async def test_a_failed_mirror_is_labelled(fault: str, label: str) -> None:
    async with FakeEngine("new").running() as base:
        # only the hang needs a short bound; the others must be labelled by what the server did, not by how fast a
        # loaded box got there (a refusal under CI load once outlasted 400 ms and read as "timeout")
        r = await mirror(base + CHAT, {"X-Fault": fault}, timeout_ms=400 if fault.startswith("hang") else 10_000)
    assert r.error is not None and r.error.split(" ", 1)[0] == label, r.error
    if fault.startswith(("malformed", "error_event", "die_mid", "truncate")):
        assert r.ttft_ms is not None  # the token that came before the fault was measured
        assert r.tpot_ms is None  # no usage: no TPOT


async def test_a_mirror_to_a_closed_port_is_a_connect_failure() -> None:
    r = await mirror(f"http://127.0.0.1:{free_port()}{CHAT}")
    assert (r.error, r.status, r.ttft_ms) == ("connect", None, None)


async def test_the_timeout_bounds_the_whole_mirror() -> None:
    async with FakeEngine("new").running() as base:
        loop = asyncio.get_running_loop()
        t0 = loop.time()
        r = await mirror(base + CHAT, {"X-Fault": "drip:100"}, timeout_ms=250)  # 4 tokens would take 400 ms
        assert loop.time() - t0 < 1.0
    assert r.error == "timeout" and r.status == 200


async def test_beyond_max_concurrency_a_mirror_is_dropped_never_queued_and_close_cancels() -> None:
    up = FakeEngine("new")
    async with up.running() as base:
        sh = Shadow(None)
        cfg = ShadowConfig(percent=100, max_concurrency=1, timeout_ms=10_000)
        first = sh.start(cfg, base + CHAT, "new", body(), {**JSON, "X-Fault": "hang:5"}, 1.0)
        second = sh.start(cfg, base + CHAT, "new", body(), JSON, 1.0)
        assert isinstance(first, asyncio.Future) and sh.in_flight == 1
        assert isinstance(second, ShadowResult) and second.dropped
        await await_until(lambda: up.stats.in_flight == 1, 5, "the first mirror at the upstream")
        await sh.close()
        assert (await first).error == "cancelled" and sh.in_flight == 0


async def test_changed_timeouts_get_a_new_client_and_the_old_one_is_closed() -> None:
    async with FakeEngine("new").running() as base:
        sh = Shadow()
        try:
            assert (await mirror(base + CHAT, timeout_ms=5_000, shadow=sh)).error is None
            [old] = sh.clients.values()
            assert (await mirror(base + CHAT, timeout_ms=6_000, shadow=sh)).error is None
            [new] = sh.clients.values()
            assert new is not old and not sh._retired and old._pool is None  # closed
        finally:
            await sh.close()
