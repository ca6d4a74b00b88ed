"""EngineClient against a scripted local server: parsing, timing, and each failure kind."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator

import orjson
import pytest
from aiohttp import web

from switchover.errors import BadInput
from switchover.testing import FakeEngine, chunk, usage_chunk
from switchover.testing.engine import stream_parts
from switchover.wire import EngineClient, FailureKind, Timeouts


@pytest.fixture(params=["raw", "aiohttp"])
def transport(request: pytest.FixtureRequest) -> str:
    """Every behaviour below holds for both transports of the client."""
    return str(request.param)


@pytest.fixture
async def server() -> AsyncIterator[FakeEngine]:
    s = await FakeEngine().start()
    yield s
    await s.stop()


async def test_streamed_chat_is_parsed_with_increasing_timestamps(transport: str, server: FakeEngine) -> None:
    async def h(req: web.Request) -> web.StreamResponse:
        role = b'data: {"id":"c","model":"m","choices":[{"index":0,"delta":{"role":"assistant"}}]}\n\n'
        return await stream_parts(
            req,
            [
                role,
                0.01,
                chunk("Hel"),
                0.01,
                chunk("lo"),
                0.01,
                chunk("", "stop"),
                usage_chunk(5, 2),
                b"data: [DONE]\n\n",
            ],
        )

    server.handler = h
    async with EngineClient(server.url, transport=transport) as c:
        rec = await c.chat([{"role": "user", "content": "hi"}], model="m", stream=True)
    assert rec.ok, rec.failure
    assert rec.text == "Hello"
    assert rec.finish_reason == "stop"
    assert rec.usage is not None and (rec.usage.prompt_tokens, rec.usage.completion_tokens) == (5, 2)
    assert rec.done_seen
    assert rec.chunk_text == ["", "Hel", "lo", ""]
    assert all(b > a for a, b in zip(rec.chunk_ns, rec.chunk_ns[1:], strict=False))
    assert rec.ttft_ns is not None and rec.e2e_ns is not None and 0 < rec.ttft_ns < rec.e2e_ns
    assert rec.ttft_ns == rec.chunk_ns[1] - rec.send_ns  # first chunk with text, not the role chunk


async def test_stream_options_include_usage_is_sent(transport: str, server: FakeEngine) -> None:
    seen: dict = {}

    async def h(req: web.Request) -> web.StreamResponse:
        seen.update(orjson.loads(await req.read()))
        return await stream_parts(req, [chunk("x", "length"), b"data: [DONE]\n\n"])

    server.handler = h
    async with EngineClient(server.url, transport=transport) as c:
        await c.complete("p", model="m", stream=True, max_tokens=1)
    assert seen["stream_options"] == {"include_usage": True}


async def test_non_streamed_completion_with_llamacpp_timings_and_cached_tokens(
    transport: str, server: FakeEngine
) -> None:
    body = {
        "id": "x",
        "model": "m",
        "choices": [{"index": 0, "text": "abc", "finish_reason": "length"}],
        "usage": {"prompt_tokens": 3, "completion_tokens": 3, "prompt_tokens_details": {"cached_tokens": 2}},
        "timings": {"prompt_n": 3, "predicted_ms": 1.5},
    }

    async def h(req: web.Request) -> web.Response:
        return web.json_response(body)

    server.handler = h
    async with EngineClient(server.url, transport=transport) as c:
        rec = await c.complete("p", model="m", max_tokens=3)
    assert rec.ok and rec.text == "abc" and rec.finish_reason == "length"
    assert rec.usage is not None and rec.usage.cached_tokens == 2
    assert rec.engine_timings == {"prompt_n": 3, "predicted_ms": 1.5}
    assert rec.response_model == "m"


@pytest.mark.parametrize(
    ("status", "payload", "shape"),
    [
        (404, {"error": {"message": "no such model", "type": "NotFoundError", "code": 404}}, "nested"),
        (400, {"object": "error", "message": "bad", "type": "BadRequestError", "code": 400}, "flat"),
        (422, {"error": "Input validation error", "error_type": "validation"}, "tgi"),
    ],
)
async def test_http_errors_are_parsed_in_every_shape(
    transport: str, server: FakeEngine, status: int, payload: dict, shape: str
) -> None:
    async def h(req: web.Request) -> web.Response:
        return web.json_response(payload, status=status)

    server.handler = h
    async with EngineClient(server.url, transport=transport) as c:
        rec = await c.chat([{"role": "user", "content": "x"}], model="nope", stream=True)
    assert rec.failure is not None
    assert rec.failure.kind == FailureKind.HTTP_STATUS and rec.failure.status == status
    assert rec.failure.body is not None and rec.failure.body.shape == shape


async def test_error_event_mid_stream_is_a_stream_error(transport: str, server: FakeEngine) -> None:
    async def h(req: web.Request) -> web.StreamResponse:
        return await stream_parts(req, [chunk("a"), b'data: {"error":{"message":"engine died","code":500}}\n\n'])

    server.handler = h
    async with EngineClient(server.url, transport=transport) as c:
        rec = await c.chat([], model="m", stream=True)
    assert rec.failure is not None and rec.failure.kind == FailureKind.STREAM_ERROR
    assert rec.text == "a" and "engine died" in rec.failure.message


async def test_stream_without_done_but_with_finish_reason_is_ok(transport: str, server: FakeEngine) -> None:
    async def h(req: web.Request) -> web.StreamResponse:
        return await stream_parts(req, [chunk("a"), chunk("", "stop")])

    server.handler = h
    async with EngineClient(server.url, transport=transport) as c:
        rec = await c.chat([], model="m", stream=True)
    assert rec.ok and not rec.done_seen and rec.finish_reason == "stop"


async def test_stream_ending_without_finish_or_done_is_truncated(transport: str, server: FakeEngine) -> None:
    async def h(req: web.Request) -> web.StreamResponse:
        return await stream_parts(req, [chunk("a")])

    server.handler = h
    async with EngineClient(server.url, transport=transport) as c:
        rec = await c.chat([], model="m", stream=True)
    assert rec.failure is not None and rec.failure.kind == FailureKind.TRUNCATED


async def test_malformed_sse_json_is_a_protocol_failure(transport: str, server: FakeEngine) -> None:
    async def h(req: web.Request) -> web.StreamResponse:
        return await stream_parts(req, [b"data: {not json\n\n", chunk("", "stop")])

    server.handler = h
    async with EngineClient(server.url, transport=transport) as c:
        rec = await c.chat([], model="m", stream=True)
    assert rec.failure is not None and rec.failure.kind == FailureKind.PROTOCOL


async def test_first_byte_timeout(transport: str, server: FakeEngine) -> None:
    async def h(req: web.Request) -> web.StreamResponse:
        return await stream_parts(req, [0.5, chunk("a", "stop")])

    server.handler = h
    async with EngineClient(server.url, transport=transport, timeouts=Timeouts(first_byte=0.1, idle=5, total=5)) as c:
        rec = await c.chat([], model="m", stream=True)
    assert rec.failure is not None and rec.failure.kind == FailureKind.FIRST_BYTE_TIMEOUT


async def test_idle_gap_timeout(transport: str, server: FakeEngine) -> None:
    async def h(req: web.Request) -> web.StreamResponse:
        return await stream_parts(req, [chunk("a"), 0.5, chunk("b", "stop")])

    server.handler = h
    async with EngineClient(server.url, transport=transport, timeouts=Timeouts(first_byte=5, idle=0.1, total=5)) as c:
        rec = await c.chat([], model="m", stream=True)
    assert rec.failure is not None and rec.failure.kind == FailureKind.IDLE_TIMEOUT
    assert rec.text == "a"


async def test_total_timeout_with_a_slow_drip(transport: str, server: FakeEngine) -> None:
    async def h(req: web.Request) -> web.StreamResponse:
        return await stream_parts(req, [p for _ in range(20) for p in (chunk("a"), 0.05)] + [chunk("", "stop")])

    server.handler = h
    async with EngineClient(server.url, transport=transport, timeouts=Timeouts(first_byte=5, idle=1, total=0.3)) as c:
        rec = await c.chat([], model="m", stream=True)
    assert rec.failure is not None and rec.failure.kind == FailureKind.TOTAL_TIMEOUT


async def test_connection_refused_is_a_connect_failure(transport: str) -> None:
    async with EngineClient("http://127.0.0.1:1", transport=transport) as c:
        rec = await c.chat([], model="m", stream=True)
    assert rec.failure is not None and rec.failure.kind == FailureKind.CONNECT
    assert "refused" in rec.failure.message


async def test_server_dying_mid_stream_is_reported(transport: str, server: FakeEngine) -> None:
    async def h(req: web.Request) -> web.StreamResponse:
        resp = web.StreamResponse(headers={"Content-Type": "text/event-stream"})
        await resp.prepare(req)
        await resp.write(chunk("a"))
        await asyncio.sleep(0.02)  # the scenario: the event goes out on its own before the server dies
        assert req.transport is not None
        req.transport.close()
        return resp

    server.handler = h
    async with EngineClient(server.url, transport=transport, timeouts=Timeouts(idle=2)) as c:
        rec = await c.chat([], model="m", stream=True)
    assert rec.failure is not None
    assert rec.failure.kind in (FailureKind.DISCONNECTED, FailureKind.TRUNCATED)


async def test_api_key_is_sent_but_never_recorded(
    transport: str, server: FakeEngine, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("SO_TEST_KEY", "sk-planted-secret-123")

    async def h(req: web.Request) -> web.StreamResponse:
        return await stream_parts(req, [chunk("a", "stop"), b"data: [DONE]\n\n"])

    server.handler = h
    async with EngineClient(server.url, transport=transport, api_key_env="SO_TEST_KEY") as c:
        rec = await c.chat([], model="m", stream=True)
        assert "sk-planted" not in repr(c)
    assert server.last_headers["Authorization"] == "Bearer sk-planted-secret-123"
    assert "sk-planted" not in orjson.dumps(rec.to_dict(keep_body=True), default=str).decode()


def test_unset_api_key_env_is_bad_input(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("SO_MISSING_KEY", raising=False)
    with pytest.raises(BadInput, match="SO_MISSING_KEY"):
        EngineClient("http://127.0.0.1:1", api_key_env="SO_MISSING_KEY")


async def test_record_round_trips_through_dict(transport: str, server: FakeEngine) -> None:
    async def h(req: web.Request) -> web.StreamResponse:
        return await stream_parts(req, [chunk("a"), chunk("", "length"), usage_chunk(1, 1), b"data: [DONE]\n\n"])

    server.handler = h
    async with EngineClient(server.url, transport=transport) as c:
        rec = await c.chat([], model="m", stream=True)
    from switchover.wire import RequestRecord

    again = RequestRecord.from_dict(orjson.loads(orjson.dumps(rec.to_dict())))
    assert again.to_dict() == rec.to_dict()


async def test_tool_call_deltas_are_assembled(transport: str, server: FakeEngine) -> None:
    def tc(args: str, name: str | None = None) -> bytes:
        fn: dict = {"arguments": args}
        if name:
            fn["name"] = name
        obj = {"choices": [{"index": 0, "delta": {"tool_calls": [{"index": 0, "function": fn}]}}]}
        return b"data: " + orjson.dumps(obj) + b"\n\n"

    async def h(req: web.Request) -> web.StreamResponse:
        return await stream_parts(
            req, [tc("", "get_weather"), tc('{"city"'), tc(': "Paris"}'), chunk("", "tool_calls")]
        )

    server.handler = h
    async with EngineClient(server.url, transport=transport) as c:
        rec = await c.chat([], model="m", stream=True)
    assert rec.tool_calls[0].name == "get_weather"
    assert rec.tool_calls[0].arguments == '{"city": "Paris"}'
    assert rec.tool_call_chunks == 3


async def test_two_streamed_choices_are_kept_apart(transport: str, server: FakeEngine) -> None:
    async def h(req: web.Request) -> web.StreamResponse:
        return await stream_parts(
            req,
            [
                chunk("a", index=0),
                chunk("c", index=1),
                chunk("b", "stop", index=0),
                chunk("d", "length", index=1),
                b"data: [DONE]\n\n",
            ],
        )

    server.handler = h
    async with EngineClient(server.url, transport=transport) as c:
        rec = await c.chat([], model="m", stream=True, n=2)
    assert rec.ok, rec.failure
    assert rec.texts == {0: "ab", 1: "cd"} and rec.finish_reasons == {0: "stop", 1: "length"}


@pytest.mark.parametrize("chunked", [False, True], ids=["content-length", "chunked"])
async def test_a_body_past_the_limit_is_refused_not_held(transport: str, server: FakeEngine, chunked: bool) -> None:
    big = b'{"choices": [{"index": 0, "text": "' + b"x" * 20_000 + b'", "finish_reason": "length"}]}'

    async def h(req: web.Request) -> web.StreamResponse:
        if not chunked:
            return web.Response(body=big, content_type="application/json")
        resp = web.StreamResponse(headers={"Content-Type": "application/json"})
        await resp.prepare(req)
        for i in range(0, len(big), 1000):
            await resp.write(big[i : i + 1000])
        await resp.write_eof()
        return resp

    server.handler = h
    limits = Timeouts(max_body=4096)
    async with EngineClient(server.url, transport=transport, timeouts=limits) as c:
        rec = await c.complete("p", model="m", stream=False)
        res = await c.request("GET", "/big")
    async with EngineClient(server.url, transport=transport) as default:
        ok = await default.complete("p", model="m", stream=False)
    assert rec.failure is not None and rec.failure.kind is FailureKind.PROTOCOL and "4096 bytes" in rec.failure.message
    assert res.failure is not None and res.failure.kind is FailureKind.PROTOCOL and res.body == b""
    assert ok.ok and ok.text == "x" * 20_000  # the default limit (64 MiB) reads it whole


async def test_an_sse_event_that_never_ends_is_refused_past_the_limit(transport: str, server: FakeEngine) -> None:
    async def h(req: web.Request) -> web.StreamResponse:
        return await stream_parts(
            req,
            [
                chunk("a"),
                b'data: {"choices": [{"index": 0, "text": "' + b"y" * 10_000,
                0.01,
                b"y" * 10_000,
                0.01,
                b'"}]}\n\n',
                chunk("", "stop"),
                b"data: [DONE]\n\n",
            ],
        )

    server.handler = h
    async with EngineClient(server.url, transport=transport, timeouts=Timeouts(max_body=8192)) as c:
        rec = await c.complete("p", model="m", stream=True)
    assert rec.failure is not None and rec.failure.kind is FailureKind.PROTOCOL
    assert "unfinished SSE event" in rec.failure.message and rec.text == "a"  # what came before is kept
