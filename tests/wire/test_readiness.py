"""Readiness tells refused, loading, slow, error and ready apart."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator

import pytest
from aiohttp import web

from switchover.errors import ExitCode
from switchover.testing import FakeEngine
from switchover.wire.readiness import ReadyState, check_ready

MODELS = {"object": "list", "data": [{"id": "m", "object": "model"}]}
DONE = {
    "id": "x",
    "model": "m",
    "choices": [{"index": 0, "text": "a", "finish_reason": "length"}],
    "usage": {"prompt_tokens": 1, "completion_tokens": 1, "total_tokens": 2},
}


@pytest.fixture
async def server() -> AsyncIterator[FakeEngine]:
    s = await FakeEngine().start()
    yield s
    await s.stop()


def _handler(models_status: int = 200, gen_status: int = 200, delay: float = 0.0, gen_body: dict | None = None):
    async def h(req: web.Request) -> web.Response:
        if req.path == "/v1/models":
            if models_status != 200:
                return web.json_response({"error": {"message": "Loading model", "code": 503}}, status=models_status)
            return web.json_response(MODELS)
        await asyncio.sleep(delay)  # the scenario: a slow generation
        if gen_status != 200:
            return web.json_response({"error": {"message": "boom"}}, status=gen_status)
        return web.json_response(gen_body or DONE)

    return h


async def test_ready(server: FakeEngine) -> None:
    server.handler = _handler()
    r = await check_ready(server.url, max_ms=2000)
    assert r.state == ReadyState.READY and r.ready and r.model == "m" and r.exit_code == ExitCode.OK


async def test_loading_is_not_ready(server: FakeEngine) -> None:
    server.handler = _handler(models_status=503)
    r = await check_ready(server.url, max_ms=2000)
    assert r.state == ReadyState.LOADING and r.exit_code == ExitCode.FAILED


async def test_slow_generation_is_not_ready(server: FakeEngine) -> None:
    server.handler = _handler(delay=0.3)
    r = await check_ready(server.url, max_ms=50)
    assert r.state == ReadyState.SLOW and not r.ready


async def test_error_generation_is_not_ready(server: FakeEngine) -> None:
    server.handler = _handler(gen_status=500)
    r = await check_ready(server.url, max_ms=2000)
    assert r.state == ReadyState.ERROR and "boom" in r.reason


async def test_empty_generation_is_not_ready(server: FakeEngine) -> None:
    body = {
        **DONE,
        "choices": [{"index": 0, "text": "", "finish_reason": "stop"}],
        "usage": {"prompt_tokens": 1, "completion_tokens": 0},
    }
    server.handler = _handler(gen_body=body)
    r = await check_ready(server.url, max_ms=2000)
    assert r.state == ReadyState.ERROR


async def test_refused_is_unreachable_exit_3() -> None:
    r = await check_ready("http://127.0.0.1:1", max_ms=500)
    assert r.state == ReadyState.REFUSED and r.exit_code == ExitCode.UNREACHABLE
