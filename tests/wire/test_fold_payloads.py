"""wire.fold.apply_payloads (the load generator's hot path) folds any read exactly as apply_events does: events
that are copies of one another but for their text are folded at once only when that changes nothing."""

from __future__ import annotations

from collections.abc import Iterable

import orjson
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from switchover.wire.fold import Folded, apply_events, apply_payloads, join_streamed_text
from switchover.wire.records import RequestRecord

# (bytes before the text, bytes after it) of chunk events as engines write them, and some that only look alike
TEMPLATES = [
    (  # the zero-work server
        b'{"id":"z","object":"chat.completion.chunk","model":"zero","choices":[{"index":0,"finish_reason":null,'
        b'"delta":{"content":"',
        b'"}}]}',
    ),
    (  # vLLM: created, logprobs and finish_reason after the delta
        b'{"id":"chatcmpl-1","object":"chat.completion.chunk","created":1733400000,"model":"m","choices":[{"index":0,'
        b'"delta":{"content":"',
        b'"},"logprobs":null,"finish_reason":null}]}',
    ),
    (  # completions
        b'{"id":"cmpl-1","object":"text_completion","model":"m","choices":[{"index":0,"text":"',
        b'","logprobs":null,"finish_reason":null}]}',
    ),
    (  # Python's json.dumps spacing
        b'{"id": "x", "model": "m", "choices": [{"index": 0, "delta": {"content": "',
        b'"}, "finish_reason": null}]}',
    ),
    (  # a second "content" after the delta's: the text's place is not the delta's
        b'{"id":"x","model":"m","choices":[{"index":0,"delta":{"content":"a"},"finish_reason":null}],'
        b'"extra":{"content":"',
        b'"}}',
    ),
    (  # the delta's content given twice: the last one counts
        b'{"id":"x","model":"m","choices":[{"delta":{"content":"a","content":"',
        b'"}}]}',
    ),
    (  # a finish reason: the copies end the stream
        b'{"id":"x","model":"m","choices":[{"index":0,"delta":{"content":"',
        b'"},"finish_reason":"stop"}]}',
    ),
    (  # not plain: a second choice index, logprobs, a role, usage
        b'{"id":"x","model":"m","choices":[{"index":1,"delta":{"content":"',
        b'"}}]}',
    ),
    (b'{"id":"x","model":"m","choices":[{"index":0,"logprobs":{"a":1},"delta":{"content":"', b'"}}]}'),
    (b'{"id":"x","model":"m","choices":[{"delta":{"role":"assistant","content":"', b'"}}]}'),
    (b'{"id":"x","model":"m","choices":[{"delta":{"reasoning_content":"r","content":"', b'"}}]}'),
    (b'{"id":"x","model":"m","error":{"message":"e"},"choices":[{"delta":{"content":"', b'"}}]}'),
    (b'{"id":"x","model":"m","object":"error","choices":[{"delta":{"content":"', b'"}}]}'),
    (b'{"id":"x","model":"m","usage":{"total_tokens":1},"choices":[{"delta":{"content":"', b'"}}]}'),
    (b'{"id":"x","model":"m","timings":{"predicted_n":1},"choices":[{"delta":{"content":"', b'"}}]}'),
    (b'{"id":"x","model":"m","usage":null,"choices":[{"delta":{"content":"', b'"}}]}'),
    (b'{"model":"m","choices":[{"delta":{"content":"', b'"}}]}'),  # no id: never known
]
OTHERS = [
    b'{"id":"z","object":"chat.completion.chunk","model":"zero","choices":[],"usage":{"prompt_tokens":3,'
    b'"completion_tokens":2,"total_tokens":5}}',
    b'{"id":"z","model":"zero","choices":[{"index":0,"delta":{"role":"assistant","content":""}}]}',
    b'{"error":{"message":"overloaded"}}',
    b'{"object":"error","message":"oom"}',
    b'{"choices":[{"delta":"x"}]}',
    b"{nope",
    b"42",
    b"[DONE]",
    b'{"choices":[{"index":0,"text":"late"}],"timings":{"predicted_n":2}}',
]
# raw bytes put in the text's place: escaped and unescaped quotes, backslashes, escapes good and bad, controls
_RAW = st.lists(
    st.sampled_from(
        [
            b"a",
            b" ",
            b",",
            b'"',
            b'","',
            b"\\",
            b'\\"',
            b"\\\\",
            b"\\n",
            b"\\u00e9",
            b"\\ud800",
            b"\\x",
            b"\x01",
            b"\xff",
        ]
    ),
    max_size=6,
).map(b"".join)
_TEXT = st.text(max_size=8).map(lambda t: orjson.dumps(t)[1:-1])  # a properly escaped JSON string's inside


@st.composite
def reads(draw: st.DrawFn) -> list[list[bytes]]:
    """A stream's payloads (mostly copies of one template with varied texts) cut into reads."""
    head, tail = draw(st.sampled_from(TEMPLATES))
    payloads: list[bytes] = []
    for _ in range(draw(st.integers(0, 40))):
        kind = draw(st.integers(0, 11))
        if kind < 6:
            payloads.append(head + draw(_TEXT) + tail)
        elif kind < 8:
            payloads.append(head + draw(_RAW) + tail)
        elif kind < 10:
            payloads.append(draw(st.sampled_from(OTHERS + [h + b"b" + t for h, t in TEMPLATES])))
        elif kind == 10:  # the text's closing quote shared with the head's opening one
            payloads.append(head + tail[1:])
        else:  # an ending that is not the template's: one byte changed, or cut short
            at = draw(st.integers(0, len(tail) - 1))
            end = tail[:at] + draw(st.sampled_from([b"", b" ", b"]", b"}", b'"', b"x"])) + tail[at + 1 :]
            payloads.append(head + draw(_TEXT) + end)
    cuts = sorted(draw(st.lists(st.integers(0, len(payloads)), max_size=4)))
    out, prev = [], 0
    for c in [*cuts, len(payloads)]:
        out.append(payloads[prev:c])
        prev = c
    return out


def _record() -> RequestRecord:
    return RequestRecord(api="chat", stream=True, model="m", started_wall=0.0, send_ns=0, status=200)


def _folded(stream: list[list[bytes]], fast: bool) -> dict[str, object]:
    rec = _record()
    for t, payloads in enumerate(stream, 1):
        if fast:
            apply_payloads(rec, payloads, t)
        else:
            apply_events(rec, [(p, None) for p in payloads], t)
    join_streamed_text(rec)
    return rec.to_dict()


@settings(max_examples=600, deadline=None)
@given(reads())
def test_folding_a_read_in_one_go_gives_the_record_event_by_event_folding_gives(stream: list[list[bytes]]) -> None:
    assert _folded(stream, fast=True) == _folded(stream, fast=False)


def _stream(n: int, head: bytes, tail: bytes) -> list[bytes]:
    return [head + b"t%d" % i + tail for i in range(n)]


def test_the_copies_of_an_engine_chunk_are_folded_without_decoding_each_event(monkeypatch: pytest.MonkeyPatch) -> None:
    import switchover.wire.fold as fold

    head, tail = TEMPLATES[0]
    calls: list[int] = []
    real = fold.apply_events

    def counting(rec: Folded, events: Iterable[tuple[bytes, str | None]], t_ns: int) -> bool:
        listed = list(events)
        calls.append(len(listed))
        return real(rec, listed, t_ns)

    monkeypatch.setattr(fold, "apply_events", counting)
    rec = _record()
    payloads = [*_stream(64, head, tail), OTHERS[0], b"[DONE]"]
    assert apply_payloads(rec, payloads, 7) is True
    assert rec.chunk_text == [f"t{i}" for i in range(64)] and rec.chunk_ns == [7] * 64
    assert rec.usage is not None and rec.usage.total_tokens == 5 and rec.done_seen
    assert sum(calls) <= 4  # the first event, the reference, the last copy, the usage event


def test_a_quote_left_unescaped_in_a_copy_is_malformed_as_event_by_event() -> None:
    head, tail = TEMPLATES[0]
    payloads = [*_stream(8, head, tail)]
    payloads[5] = head + b'say "hi"' + tail
    rec = _record()
    apply_payloads(rec, payloads, 1)
    assert rec.failure is not None and "malformed" in rec.failure.message
    assert rec.chunk_text == [f"t{i}" for i in range(8) if i != 5]


@pytest.mark.parametrize(
    "text", [b'a","b', b'","', b"a\\", b'a\\\\"b', b'\\"', b"\x01", b"\\ud800", b"\xff", b"\\u00e9\\n", b""]
)
@pytest.mark.parametrize("at", [2, 5, 7])
def test_any_text_in_a_copy_folds_as_event_by_event(text: bytes, at: int) -> None:
    for head, tail in TEMPLATES[:4]:
        payloads = _stream(10, head, tail)
        payloads[at] = head + text + tail
        assert _folded([payloads], fast=True) == _folded([payloads], fast=False), (head, text)
