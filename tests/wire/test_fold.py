"""wire.fold's rules for what an engine sent: error events, malformed events, the end of a stream; and
EngineClient.post, the raw request the gateway's shadow sends."""

from __future__ import annotations

import pytest
from aiohttp import web

from switchover.errors import BadInput
from switchover.testing import FakeEngine, chunk
from switchover.testing.engine import stream_parts
from switchover.wire import EngineClient, FailureKind, RequestRecord
from switchover.wire.fold import apply_body, apply_events, ended
from switchover.wire.sse import SSEEvent, SSEParser, parse_all, whole_events


def record() -> RequestRecord:
    return RequestRecord(api="chat", stream=True, model="m", started_wall=0.0, send_ns=0, status=200)


def fold(*reads: bytes) -> RequestRecord:
    rec, parser = record(), SSEParser()
    for i, data in enumerate(reads):
        apply_events(rec, parser.feed(data), i + 1)
    apply_events(rec, parser.finish(), len(reads) + 1)
    return rec


def test_an_event_of_type_error_is_a_stream_error_whatever_its_data() -> None:
    text = fold(chunk("a"), b"event: error\ndata: upstream went away\n\n")
    shaped = fold(chunk("a"), b'event: error\ndata: {"message": "overloaded"}\n\n')
    for rec, said in ((text, "upstream went away"), (shaped, '{"message": "overloaded"}')):
        assert rec.failure is not None and rec.failure.kind is FailureKind.STREAM_ERROR
        assert rec.failure.body is not None and rec.failure.body.message == said
    assert text.chunk_text == ["a"]


def test_error_objects_in_each_shape_are_stream_errors_and_a_null_error_key_is_not() -> None:
    for data in (b'{"error": {"message": "oom"}}', b'{"object": "error", "message": "oom"}', b'{"error": "oom"}'):
        rec = fold(chunk("a"), b"data: " + data + b"\n\n")
        assert rec.failure is not None and rec.failure.kind is FailureKind.STREAM_ERROR
        assert rec.failure.body is not None and rec.failure.body.message == "oom"
    ok = fold(b'data: {"error": null, "choices": [{"delta": {"content": "a"}, "finish_reason": "stop"}]}\n\n')
    assert ok.failure is None and ok.chunk_text == ["a"]


@pytest.mark.parametrize(
    "data",
    [
        b"42",
        b'"text"',
        b"[1, 2]",
        b"{nope",
        b'{"choices": [1]}',
        b'{"choices": {"a": 1}}',
        b'{"choices": [{"delta": "x"}]}',
    ],
)
def test_data_that_is_not_an_object_of_the_expected_shape_is_malformed_not_a_crash(data: bytes) -> None:
    rec = fold(chunk("a"), b"data: " + data + b"\n\n", chunk("", "stop"))
    assert rec.failure is not None and rec.failure.kind is FailureKind.PROTOCOL
    assert rec.chunk_ns[-1] == 3  # later events are still folded


def test_nothing_after_done_counts_whichever_read_it_arrives_in() -> None:
    same = fold(chunk("a", "stop") + b"data: [DONE]\n\n" + chunk("late") + b"data: {nope\n\n")
    later = fold(chunk("a", "stop") + b"data: [DONE]\n\n", chunk("late") + b"data: {nope\n\n")
    for rec in (same, later):
        assert rec.done_seen and rec.failure is None and rec.chunk_text == ["a"]


def test_a_stream_has_ended_with_done_or_a_finish_reason_on_any_choice() -> None:
    assert not ended(fold(chunk("a")))
    assert ended(fold(chunk("a"), b"data: [DONE]\n\n"))
    assert ended(fold(chunk("a"), chunk("", "length", index=1)))


def test_a_body_of_the_wrong_shape_is_malformed_not_a_crash() -> None:
    for raw in (b'{"choices": [1]}', b"[1]", b"nope"):
        rec = record()
        apply_body(rec, raw)
        assert rec.failure is not None and rec.failure.kind is FailureKind.PROTOCOL


@pytest.mark.parametrize(
    "read",
    [
        b"data: a\n\n",
        b'data: {"x":1}\n\ndata: [DONE]\n\n',
        b"data: a\n\ndata: b",
        b"data: a\r\n\r\n",
        b": ping\n\ndata: a\n\n",
        b"event: error\ndata: a\n\n",
        b"data: a\ndata: b\n\n",
        b"data:a\n\n",
        b"\n\n",
    ],
)
def test_whole_events_is_what_a_fresh_parser_returns_or_none(read: bytes) -> None:
    fast = whole_events(read)
    if fast is not None:
        assert fast == SSEParser().feed(read) == parse_all([read])
        assert all(isinstance(e, SSEEvent) for e in fast)
    else:
        assert read in (
            b"data: a\n\ndata: b",
            b"data: a\r\n\r\n",
            b": ping\n\ndata: a\n\n",
            b"event: error\ndata: a\n\n",
            b"data: a\ndata: b\n\n",
            b"data:a\n\n",
            b"\n\n",
        )


@pytest.fixture(params=["raw", "aiohttp"])
def transport(request: pytest.FixtureRequest) -> str:
    return str(request.param)


async def test_post_sends_the_callers_body_and_headers_and_folds_the_stream(transport: str) -> None:
    server = await FakeEngine().start()
    seen: dict[str, object] = {}

    async def h(req: web.Request) -> web.StreamResponse:
        seen["body"], seen["target"] = await req.read(), req.path_qs
        return await stream_parts(req, [chunk("Hi"), chunk("", "stop"), b"data: [DONE]\n\n"])

    server.handler = h
    try:
        async with EngineClient(server.url, transport=transport) as c:
            rec = await c.post(
                "/v1/chat/completions?x=1",
                b'{"stream":true}',
                {"content-type": "application/json", "Authorization": "Bearer k", "Host": "evil"},
            )
    finally:
        await server.stop()
    assert rec.ok and rec.text == "Hi" and rec.api == "chat" and rec.ttft_ns is not None
    assert seen == {"body": b'{"stream":true}', "target": "/v1/chat/completions?x=1"}
    headers = {k.lower(): v for k, v in server.last_headers.items()}
    assert headers["authorization"] == "Bearer k" and headers["host"] != "evil"
    assert headers["content-type"] == "application/json" and headers["content-length"] == "15"
    if transport == "raw":  # exactly the caller's headers plus Host and Content-Length
        assert set(headers) == {"content-type", "authorization", "host", "content-length"}


async def test_post_refuses_a_header_that_would_break_its_line() -> None:
    async with EngineClient("http://127.0.0.1:9") as c:
        with pytest.raises(BadInput) as err:
            await c.post("/v1/completions", b"{}", {"X-A": "ok\r\nX-Injected: 1"})
    assert "ok" not in str(err.value)  # the value (it may hold a key) is never echoed


@pytest.mark.parametrize("bad", ['"12"', "1e40", "1000000000000000000000000000000", "true", "-5", "[1]", "12.0"])
def test_a_usage_count_that_is_not_a_whole_number_in_range_is_unreported_and_the_bench_row_still_stores(
    bad: str,
) -> None:
    from switchover.bench.accumulate import StepAccumulator
    from switchover.bench.batch import RowBatch

    usage = f'{{"usage": {{"prompt_tokens": {bad}, "completion_tokens": 1, "total_tokens": {bad}, '
    usage += f'"prompt_tokens_details": {{"cached_tokens": {bad}}}}}, "choices": []}}'
    rec = fold(chunk("a"), b"data: " + usage.encode() + b"\n\n", b"data: [DONE]\n\n")
    assert rec.usage is not None and rec.usage.completion_tokens == 1
    assert rec.usage.prompt_tokens is None and rec.usage.total_tokens is None and rec.usage.cached_tokens is None
    batch = RowBatch({"endpoint": "x", "step": 0, "repeat": 0, "concurrency": 1, "rate": None, "bucket": "d"})
    batch.add(rec, index=0, warmup=False, sched_ns=None, isl_target=None, osl_target=1)
    assert batch.table().column("prompt_tokens").to_pylist() == [None]  # an int32 column: a bad count once crashed
    acc = StepAccumulator(labels=batch.labels)
    acc.add_batch(batch)
    assert acc.lengths.check().isl_unreported == 1
