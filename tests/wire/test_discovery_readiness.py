"""`ready` tells a loading answer by the engine's profile (readiness section), not by a rule of its own."""

from __future__ import annotations

from aiohttp import web

from switchover.testing import FakeEngine
from switchover.wire.readiness import ReadyState, check_ready


def _answer(status: int, message: str):
    async def h(req: web.Request) -> web.Response:
        return web.json_response({"error": {"message": message, "code": status}}, status=status)

    return h


async def test_llamacpps_loading_answer_is_loading_for_llamacpp() -> None:
    async with FakeEngine(handler=_answer(503, "Loading model")).running() as url:
        r = await check_ready(url, max_ms=2000, engine="llamacpp")
    assert r.state == ReadyState.LOADING and "llama.cpp" in r.reason


async def test_a_503_from_vllm_is_an_error_not_loading_since_vllm_refuses_connections_while_it_loads() -> None:
    async with FakeEngine(handler=_answer(503, "Loading model")).running() as url:
        r = await check_ready(url, max_ms=2000, engine="vllm")
    assert r.state == ReadyState.ERROR and r.status == 503


async def test_a_503_that_is_no_profiles_loading_answer_is_an_error() -> None:
    async with FakeEngine(handler=_answer(503, "server overloaded")).running() as url:
        r = await check_ready(url, max_ms=2000)
    assert r.state == ReadyState.ERROR and "overloaded" in r.reason


async def test_a_loading_answer_to_the_completion_is_loading_too() -> None:
    async def h(req: web.Request) -> web.Response:
        return web.json_response({"error": {"message": "Loading model", "code": 503}}, status=503)

    async with FakeEngine(handler=h).running() as url:
        r = await check_ready(url, model="m", max_ms=2000, engine="llamacpp")
    assert r.state == ReadyState.LOADING
