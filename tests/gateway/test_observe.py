"""The gateway's Observer reads a response by the bench's rules: on the same bytes, split anywhere, it finds the
same TTFT, E2E, TPOT, N and the same error / malformed / truncated verdict as wire.fold + bench.stats."""

from __future__ import annotations

from typing import Any

import orjson
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from switchover.bench.rows import row_from_record
from switchover.bench.stats import first_token_ns, last_chunk_ns, request_metrics
from switchover.gateway.observe import Observer, record_timings
from switchover.wire.fold import apply_events, ended, join_streamed_text
from switchover.wire.records import Failure, FailureKind, RequestRecord
from switchover.wire.sse import SSEParser

MS = 1_000_000
SEND = 1_000 * MS


def ev(obj: Any, event: str | None = None, crlf: bool = False) -> bytes:
    data = obj if isinstance(obj, bytes) else orjson.dumps(obj)
    out = (f"event: {event}\n".encode() if event else b"") + b"data: " + data + b"\n\n"
    return out.replace(b"\n", b"\r\n") if crlf else out


def delta(finish: str | None = None, **d: Any) -> dict[str, Any]:
    return {
        "id": "c1",
        "model": "m",
        "object": "chat.completion.chunk",
        "choices": [{"index": 0, "delta": d, "finish_reason": finish}],
    }


def text(t: str, finish: str | None = None) -> dict[str, Any]:
    return {"id": "c1", "model": "m", "choices": [{"index": 0, "text": t, "finish_reason": finish}]}


def usage(n: int, prompt: int = 7) -> dict[str, Any]:
    return {
        "id": "c1",
        "model": "m",
        "choices": [],
        "usage": {"prompt_tokens": prompt, "completion_tokens": n, "total_tokens": n + prompt},
    }


DONE = b"data: [DONE]\n\n"
TOOL = {"index": 0, "id": "call_1", "type": "function", "function": {"name": "f", "arguments": '{"a"'}}

# name -> (events, one per read at 1, 2, 3... ms after send; expected (ttft_ms, e2e_ms, n, verdict))
CASES: dict[str, tuple[list[bytes], tuple[float | None, float | None, int | None, str | None]]] = {
    "chat": (
        [
            ev(delta(role="assistant", content="")),
            ev(delta(content="Hel")),
            ev(delta(content="lo")),
            ev(delta("stop")),
            ev(usage(2)),
            DONE,
        ],
        (2.0, 4.0, 2, None),
    ),
    "reasoning_only_deltas_are_not_the_first_token": (
        [
            ev(delta(role="assistant")),
            ev(delta(reasoning_content="think")),
            ev(delta(reasoning_content="more")),
            ev(delta(content="A")),
            ev(delta(content="B", finish="stop")),
            ev(usage(4)),
            DONE,
        ],
        (4.0, 5.0, 4, None),
    ),
    "tool_call_deltas_only": (
        [
            ev(delta(role="assistant", tool_calls=[TOOL])),
            ev(delta(tool_calls=[TOOL])),
            ev(delta("tool_calls")),
            ev(usage(9)),
            DONE,
        ],
        (None, 3.0, 9, None),
    ),
    "usage_only_final_chunk_is_not_the_end": (
        [ev(text("a")), ev(text("b")), ev(text("", "length")), ev(usage(2)), ev(usage(2)), DONE],
        (1.0, 3.0, 2, None),
    ),
    "completions_without_usage": ([ev(text("a")), ev(text("b", "stop")), DONE], (1.0, 2.0, None, None)),
    "event_error_block": (
        [ev(delta(content="a")), ev({"message": "overloaded"}, event="error"), DONE],
        (1.0, 1.0, None, "stream_error"),
    ),
    "event_error_with_text_data": (
        [ev(delta(content="a")), ev(b"upstream went away", event="error")],
        (1.0, 1.0, None, "stream_error"),
    ),
    "object_error": (
        [ev(delta(content="a")), ev({"object": "error", "message": "boom", "code": 500}), DONE],
        (1.0, 1.0, None, "stream_error"),
    ),
    "nested_error": (
        [ev(delta(content="a")), ev({"error": {"message": "oom", "code": 500}}), DONE],
        (1.0, 1.0, None, "stream_error"),
    ),
    "null_error_key_is_not_an_error": (
        [ev({**delta(content="a", finish="stop"), "error": None}), DONE],
        (1.0, 1.0, None, None),
    ),
    "malformed_data_line": (
        [ev(delta(content="a")), b'data: {"choices": [{"delta": {"content": "x"\n\n', DONE],
        (1.0, 1.0, None, "malformed"),
    ),
    "non_object_json": (
        [ev(delta(content="a")), b"data: 42\n\n", ev(delta("stop")), DONE],
        (1.0, 3.0, None, "malformed"),
    ),
    "wrong_structure": (
        [ev(delta(content="a")), ev({"choices": [1]}), ev(delta("stop")), DONE],
        (1.0, 3.0, None, "malformed"),
    ),
    "done_missing_after_finish_reason": (
        [ev(delta(content="a")), ev(delta(content="b", finish="length")), ev(usage(2))],
        (1.0, 2.0, 2, None),
    ),
    "done_missing_and_no_finish_reason": (
        [ev(delta(content="a")), ev(delta(content="b"))],
        (1.0, 2.0, None, "truncated"),
    ),
    "crlf_framing": (
        [
            ev(delta(content="a"), crlf=True),
            ev(delta(content="b"), crlf=True),
            ev(delta("stop"), crlf=True),
            ev(usage(3), crlf=True),
            b"data: [DONE]\r\n\r\n",
        ],
        (1.0, 3.0, 3, None),
    ),
    "events_after_done_do_not_count": (
        [ev(delta(content="a", finish="stop")), ev(usage(1)), DONE, ev(delta(content="late")), b"data: {nope\n\n"],
        (1.0, 1.0, 1, None),
    ),
    "comments_and_last_event_without_blank_line": (
        [b": keep-alive\n\n", ev(delta(content="a")), b'data: {"choices":[{"delta":{},"finish_reason":"stop"}]}'],
        (2.0, 4.0, None, None),
    ),  # finish() stamps it
}


def bench_fold(reads: list[tuple[bytes, int]], end_ns: int) -> RequestRecord:
    """What the wire client does with a streamed body (wire/client.py `_exchange`, raw_http.py `_complete`)."""
    rec = RequestRecord(api="chat", stream=True, model="m", started_wall=0.0, send_ns=SEND, status=200)
    parser = SSEParser()
    for data, t in reads:
        apply_events(rec, parser.feed(data), t)
    apply_events(rec, parser.finish(), end_ns)
    rec.end_ns = end_ns
    join_streamed_text(rec)
    if rec.failure is None and not ended(rec):
        rec.failure = Failure(FailureKind.TRUNCATED, "stream ended without finish_reason or [DONE]", rec.status)
    return rec


def bench_verdict(rec: RequestRecord) -> str | None:
    kinds = {
        FailureKind.STREAM_ERROR: "stream_error",
        FailureKind.PROTOCOL: "malformed",
        FailureKind.TRUNCATED: "truncated",
    }
    return None if rec.failure is None else kinds[rec.failure.kind]


def observe(reads: list[tuple[bytes, int]], end_ns: int) -> Observer:
    obs = Observer()
    for data, t in reads:
        obs.feed(data, t)
    obs.finish(end_ns)
    return obs


def observer_verdict(obs: Observer) -> str | None:
    """The order relay.py and the shadow judge a stream in."""
    if obs.error:
        return "stream_error"
    if obs.malformed:
        return "malformed"
    return None if obs.complete else "truncated"


def assert_same_reading(reads: list[tuple[bytes, int]]) -> None:
    end = reads[-1][1] + MS if reads else SEND + MS
    rec, obs = bench_fold(reads, end), observe(reads, end)
    t = obs.timings(SEND, stream=True)
    row = row_from_record(rec)
    assert observer_verdict(obs) == bench_verdict(rec)
    assert obs.first_content_ns == first_token_ns(row)
    n = rec.usage.completion_tokens if rec.usage else None
    assert (t.completion_tokens if t.tokens_source == "usage" else None) == n
    assert t.finish_reason == rec.finish_reason and t.prompt_tokens == row["prompt_tokens"]
    if rec.failure is None:
        m = request_metrics(row)
        assert (t.ttft_ms, t.e2e_ms, t.tpot_ms) == (m.ttft_ms, m.e2e_ms, m.tpot_ms)
    else:  # bench drops a failed request's latencies; the times it would have used still agree
        last = last_chunk_ns(row)
        assert t.e2e_ms == (None if last is None else (last - SEND) / MS)
    r = record_timings(rec)  # the shadow's reading of a wire record
    assert (r.ttft_ms, r.e2e_ms, r.tpot_ms, r.finish_reason) == (t.ttft_ms, t.e2e_ms, t.tpot_ms, t.finish_reason)


def one_read_per_event(events: list[bytes]) -> list[tuple[bytes, int]]:
    return [(e, SEND + (i + 1) * MS) for i, e in enumerate(events)]


@pytest.mark.parametrize("name", list(CASES))
def test_observer_reads_each_stream_as_expected_and_as_the_bench_does(name: str) -> None:
    events, (ttft, e2e, n, verdict) = CASES[name]
    reads = one_read_per_event(events)
    obs = observe(reads, reads[-1][1] + MS)
    t = obs.timings(SEND, stream=True)
    assert (t.ttft_ms, t.e2e_ms, t.completion_tokens if t.tokens_source == "usage" else None) == (ttft, e2e, n)
    assert observer_verdict(obs) == verdict
    if ttft is None or e2e is None or n is None or n < 2:
        assert t.tpot_ms is None
    else:
        assert t.tpot_ms == pytest.approx((e2e - ttft) / (n - 1))
    assert_same_reading(reads)


@pytest.mark.parametrize("name", list(CASES))
def test_observer_and_bench_agree_when_the_stream_is_split_at_every_byte(name: str) -> None:
    stream = b"".join(CASES[name][0])
    for cut in range(1, len(stream)):
        assert_same_reading([(stream[:cut], SEND + MS), (stream[cut:], SEND + 2 * MS)])


@settings(max_examples=150, deadline=None)
@given(name=st.sampled_from(sorted(CASES)), cuts=st.lists(st.integers(min_value=1, max_value=2000), max_size=12))
def test_observer_and_bench_agree_under_any_split(name: str, cuts: list[int]) -> None:
    stream = b"".join(CASES[name][0])
    bounds = sorted({c % len(stream) for c in cuts} - {0})
    pieces = [stream[a:b] for a, b in zip([0, *bounds], [*bounds, len(stream)], strict=True)]
    assert_same_reading([(p, SEND + (i + 1) * MS) for i, p in enumerate(pieces)])


def test_record_timings_of_a_wire_record_equal_the_bench_metrics() -> None:
    reads = one_read_per_event(CASES["chat"][0])
    rec = bench_fold(reads, reads[-1][1] + MS)
    t, m = record_timings(rec), request_metrics(row_from_record(rec))
    assert (t.ttft_ms, t.e2e_ms, t.tpot_ms, t.completion_tokens) == (m.ttft_ms, m.e2e_ms, m.tpot_ms, m.n_out)
    assert (t.ttft_ms, t.e2e_ms, t.tpot_ms) == (2.0, 4.0, 2.0)


def test_without_usage_n_falls_back_to_events_with_text_and_tpot_is_not_measured() -> None:
    reads = one_read_per_event(CASES["completions_without_usage"][0])
    t = observe(reads, SEND + 9 * MS).timings(SEND, stream=True)
    assert (t.completion_tokens, t.tokens_source, t.tpot_ms) == (2, "chunks", None)
    assert t.ttft_ms == 1.0


def test_a_non_streamed_body_has_no_ttft_and_ends_when_the_body_arrived() -> None:
    obs = Observer()
    body = {
        "id": "x",
        "model": "m",
        "choices": [{"index": 0, "message": {"content": "hi"}, "finish_reason": "stop"}],
        "usage": {"prompt_tokens": 3, "completion_tokens": 5, "total_tokens": 8},
    }
    obs.body(orjson.dumps(body), SEND + 40 * MS)
    t = obs.timings(SEND, stream=False)
    assert (t.ttft_ms, t.tpot_ms, t.e2e_ms, t.completion_tokens, t.tokens_source) == (None, None, 40.0, 5, "usage")
    assert (t.prompt_tokens, t.finish_reason, obs.model, obs.malformed) == (3, "stop", "m", False)


def test_a_body_that_is_not_json_is_malformed_and_an_empty_one_is_not() -> None:
    bad, empty = Observer(), Observer()
    bad.body(b"<html>502</html>", 1)
    empty.body(b"", 1)
    assert bad.malformed and not empty.malformed


def test_an_error_body_is_the_engines_error() -> None:
    obs = Observer()
    obs.body(b'{"object":"error","message":"model not found","code":404}', 1)
    assert obs.error == "model not found" and not obs.malformed


def test_an_error_event_with_an_empty_message_still_counts_as_an_error() -> None:
    obs = Observer()
    obs.feed(b'data: {"error":{"message":""}}\n\n', 1)
    assert obs.error


def test_memory_stays_flat_over_a_long_stream() -> None:
    obs = Observer()
    one = ev(delta(content="x"))
    for i in range(10_000):
        obs.feed(one, SEND + i)
    assert len(obs.chunk_ns) < 64 and len(obs.chunk_text) < 64
    assert obs.content_events == 10_000 and obs.first_content_ns == SEND
    assert obs.timings(SEND, stream=True).e2e_ms == 9_999 / MS


def test_observer_keeps_the_attributes_the_gateway_reads_today() -> None:
    reads = one_read_per_event(CASES["chat"][0])
    obs = observe(reads, SEND + 9 * MS)
    assert (obs.first_content_ns, obs.content_events, obs.last_ns) == (SEND + 2 * MS, 2, SEND + 6 * MS)
    assert (obs.completion_tokens, obs.prompt_tokens, obs.finish_reason, obs.model) == (2, 7, "stop", "m")
    assert obs.done and obs.complete and obs.error is None and not obs.malformed
