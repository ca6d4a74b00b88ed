"""Pure pieces of the relay: the error event, model rewriting, the stream observer, prompt estimates."""

from __future__ import annotations

import orjson

from switchover.gateway.observe import Observer
from switchover.gateway.prompt import PromptEstimator, prompt_text
from switchover.gateway.relay import error_event, model_rewriter, render
from switchover.gateway.shadow import shadow_body
from switchover.wire.sse import SSEEvent, parse_all


def test_error_event_is_well_formed_sse_that_ends_with_done():
    evs = parse_all([b'data: {"partial', error_event("boom", "m")])
    assert evs[-1].data == b"[DONE]"
    err = orjson.loads(evs[-2].data)
    assert err["error"]["message"] == "boom" and err["choices"][0]["finish_reason"] == "error"
    assert err["model"] == "m"


def test_model_rewriter_replaces_only_the_model_field():
    rw = model_rewriter("engine/x", "asked")
    assert rw is not None
    out = rw(b'{"id":"engine/x","model": "engine/x","choices":[]}')
    assert orjson.loads(out) == {"id": "engine/x", "model": "asked", "choices": []}
    assert model_rewriter("same", "same") is None and model_rewriter(None, "a") is None
    rendered = render([SSEEvent(b'{"model":"engine/x"}', "delta")], rw)
    assert rendered == b'event: delta\ndata: {"model":"asked"}\n\n'


def test_observer_counts_content_events_usage_and_completion():
    obs = Observer()
    stream = (
        b'data: {"model":"m","choices":[{"delta":{"role":"assistant"}}]}\n\n'
        b'data: {"choices":[{"delta":{"content":"a"}}]}\n\ndata: {"choices":[{"text":"b",'
        b'"finish_reason":"stop"}]}\n\ndata: {"choices":[],"usage":{"prompt_tokens":3,"completion_tokens":2}}'
        b"\n\ndata: [DONE]\n\n"
    )
    for i in range(0, len(stream), 7):  # any split
        obs.feed(stream[i : i + 7], i)
    assert (obs.content_events, obs.finish_reason, obs.completion_tokens, obs.prompt_tokens) == (2, "stop", 2, 3)
    assert obs.done and obs.complete and obs.model == "m" and not obs.malformed
    assert obs.first_content_ns is not None and obs.first_event_ns < obs.first_content_ns


def test_observer_flags_malformed_and_error_events():
    bad = Observer()
    bad.feed(b"data: {nope\n\n", 1)
    assert bad.malformed and not bad.complete
    err = Observer()
    err.feed(b'data: {"error":{"message":"overloaded"}}\n\n', 1)
    assert err.error == "overloaded"


def test_prompt_estimates():
    obj = {
        "messages": [
            {"role": "user", "content": "abcd" * 10},
            {"role": "user", "content": [{"type": "text", "text": "xy"}]},
        ]
    }
    assert prompt_text(obj)[0].endswith("xy")
    assert PromptEstimator(None, 4).estimate(obj) == 11  # 43 bytes / 4, rounded up
    assert PromptEstimator(None, 4).estimate({"prompt": [1, 2, 3]}) == 3


def test_shadow_body_streams_with_usage_and_clamps():
    body = orjson.loads(shadow_body({"model": "a", "max_tokens": 100, "stream": False}, "b", 16))
    assert body == {"model": "b", "max_tokens": 16, "stream": True, "stream_options": {"include_usage": True}}
    assert orjson.loads(shadow_body({"model": "a"}, None, 8))["max_tokens"] == 8
    assert "max_tokens" not in orjson.loads(shadow_body({"model": "a"}, None, None))


def test_observer_fast_path_agrees_with_the_sse_parser_under_any_split():
    stream = (
        b'data: {"choices":[{"delta":{"content":"a"}}]}\n\ndata: {"choices":[{"text":"b"}]}\n\n'
        b': ping\n\ndata: {"choices":[{"delta":{"content":"c"}}]}\r\n\r\nevent: x\ndata: {"choices":[]}\n'
        b'data: {"more":1}\n\ndata: [DONE]\n\n'
    )
    want = [e.data for e in parse_all([stream])]
    for step in (1, 3, 7, 50, len(stream)):
        obs = Observer()
        got = [e.data for i in range(0, len(stream), step) for e in obs.feed(stream[i : i + step], i)]
        got += [e.data for e in obs.finish(0)]
        assert got == want and obs.done and obs.content_events == 3
    whole = b'data: {"choices":[{"delta":{"content":"a"}}]}\n\ndata: [DONE]\n\n'
    obs = Observer()
    assert [e.data for e in obs.feed(whole, 0)] == [e.data for e in parse_all([whole])]
    assert obs.simple  # whole one-line events never reach the SSEParser


def test_the_usage_only_event_is_cut_out_of_a_read_as_the_re_framing_would():
    from switchover.gateway.relay import without_usage

    read = (
        b'data: {"choices":[{"delta":{"content":"a"}}],"usage":null}\n\n'
        b'data: {"choices":[],"usage":{"completion_tokens":1}}\n\ndata: [DONE]\n\n'
    )
    want = render(parse_all([read]), lambda d: d, strip_usage=True)
    assert without_usage(read) == want == read.replace(b'data: {"choices":[],"usage":{"completion_tokens":1}}\n\n', b"")
    assert without_usage(b"data: [DONE]\n\n") == b"data: [DONE]\n\n"
    assert without_usage(b'event: u\ndata: {"choices":[],"usage":{}}\n\n') is None  # re-framed instead
