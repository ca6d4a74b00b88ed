"""The SSE parser gives the same events under every split of the byte stream."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from switchover.wire.sse import SSEEvent, SSEParser, parse_all, whole_events

# text without line terminators (CR/LF) for field values
_value = st.text(alphabet=st.characters(blacklist_characters="\r\n", blacklist_categories=("Cs",)), max_size=40)
_newline = st.sampled_from(["\n", "\r\n", "\r"])


@st.composite
def streams(draw: st.DrawFn) -> tuple[bytes, list[SSEEvent]]:
    """A serialised stream with random line endings, comments and multi-line data, and the events it encodes."""
    out: list[str] = []
    expected: list[SSEEvent] = []

    def nl() -> str:
        # a CR followed by a line starting with LF would read as one CRLF: the format itself is ambiguous there
        piece = draw(_newline)
        if out and out[-1].endswith("\r") and piece.startswith("\n"):
            piece = "\r"
        return piece

    for _ in range(draw(st.integers(0, 6))):
        if draw(st.booleans()):
            out.append(":" + draw(_value))
            out.append(nl())  # a comment (keep-alive)
        event = draw(st.one_of(st.none(), st.sampled_from(["error", "message", "ping"])))
        if event is not None:
            out.append(f"event: {event}")
            out.append(nl())
        lines = draw(st.lists(_value, min_size=1, max_size=3))
        for line in lines:
            space = " " if draw(st.booleans()) else ""
            # a value that itself starts with a space needs the separator space so it survives
            if line.startswith(" "):
                space = " "
            out.append(f"data:{space}{line}")
            out.append(nl())
        out.append(nl())
        expected.append(SSEEvent("\n".join(lines).encode(), event, None))
    return "".join(out).encode(), expected


def _split(data: bytes, cuts: list[int]) -> list[bytes]:
    points = sorted({min(c, len(data)) for c in cuts})
    pieces, prev = [], 0
    for p in points:
        pieces.append(data[prev:p])
        prev = p
    pieces.append(data[prev:])
    return pieces


@settings(max_examples=400, deadline=None)
@given(streams(), st.lists(st.integers(0, 400), max_size=30))
def test_rechunking_never_changes_what_is_parsed(stream: tuple[bytes, list[SSEEvent]], cuts: list[int]) -> None:
    data, expected = stream
    assert parse_all([data]) == expected
    assert parse_all(_split(data, cuts)) == expected


@settings(max_examples=200, deadline=None)
@given(streams())
def test_byte_by_byte_feed_matches_whole(stream: tuple[bytes, list[SSEEvent]]) -> None:
    data, expected = stream
    assert parse_all([data[i : i + 1] for i in range(len(data))]) == expected


def test_crlf_split_between_reads_is_one_line_end() -> None:
    p = SSEParser()
    assert p.feed(b"data: a\r") == []
    assert p.feed(b"\n\r") == [SSEEvent(b"a")]
    assert p.feed(b"\ndata: b\n\n") == [SSEEvent(b"b")]


def test_multiline_data_is_joined_with_newline() -> None:
    assert parse_all([b'data: {"a":\ndata: 1}\n\n']) == [SSEEvent(b'{"a":\n1}')]


def test_comments_are_counted_and_not_dispatched() -> None:
    p = SSEParser()
    assert p.feed(b": ping\n\n: ping\n\ndata: x\n\n") == [SSEEvent(b"x")]
    assert p.comments == 2


def test_missing_final_blank_line_still_dispatches_at_end() -> None:
    assert parse_all([b'data: {"x":1}\n\ndata: [DONE]']) == [SSEEvent(b'{"x":1}'), SSEEvent(b"[DONE]")]


def test_error_event_name_is_kept() -> None:
    events = parse_all([b'event: error\ndata: {"error":{"message":"boom"}}\n\n'])
    assert events == [SSEEvent(b'{"error":{"message":"boom"}}', "error")]


def test_field_without_colon_and_unknown_fields_are_ignored() -> None:
    assert parse_all([b"data\nretry: 10\nfoo: bar\ndata: x\n\n"]) == [SSEEvent(b"\nx")]


def _parse_raw(chunks: list[bytes]) -> list[tuple[bytes, str | None, str | None]]:
    p = SSEParser()
    out: list[tuple[bytes, str | None, str | None]] = []
    for c in chunks:
        out.extend(tuple(e) for e in p.feed_raw(c))  # type: ignore[misc]
    out.extend(tuple(e) for e in p.finish())  # type: ignore[misc]
    return out


@settings(max_examples=400, deadline=None)
@given(streams(), st.lists(st.integers(0, 400), max_size=30))
def test_the_hot_path_reads_every_stream_as_feed_does(stream: tuple[bytes, list[SSEEvent]], cuts: list[int]) -> None:
    data, expected = stream
    want = [tuple(e) for e in expected]
    assert _parse_raw([data]) == want
    assert _parse_raw(_split(data, cuts)) == want


def test_the_hot_path_splits_engine_style_events_in_one_pass() -> None:
    events = SSEParser().feed_raw(b'data: {"a":1}\n\ndata: {"b":2}\n\ndata: [DONE]\n\n')
    assert events == [(b'{"a":1}', None, None), (b'{"b":2}', None, None), (b"[DONE]", None, None)]
    assert type(events[0]) is tuple  # not SSEEvent: the cheap form


@settings(max_examples=400, deadline=None)
@given(streams())
def test_whole_events_is_none_or_what_a_fresh_parser_returns(stream: tuple[bytes, list[SSEEvent]]) -> None:
    data, _ = stream
    fast = whole_events(data)
    assert fast is None or fast == SSEParser().feed(data) == parse_all([data])
    one_line = (
        data.endswith(b"\n\n")
        and b"\r" not in data
        and all(b[:6] == b"data: " and b"\n" not in b for b in data[:-2].split(b"\n\n"))
    )
    assert (fast is not None) == one_line  # every read of whole one-line events takes the fast path


def _parse_payloads(chunks: list[bytes]) -> list[tuple[bytes, str | None]]:
    """What the raw transport reads: feed_payloads where it answers, feed_raw where it does not."""
    p = SSEParser()
    out: list[tuple[bytes, str | None]] = []
    for c in chunks:
        payloads = p.feed_payloads(c)
        if payloads is None:
            out.extend((e[0], e[1]) for e in p.feed_raw(c))
        else:
            out.extend((d, None) for d in payloads)
    out.extend((e.data, e.event) for e in p.finish())
    return out


@st.composite
def engine_streams(draw: st.DrawFn) -> tuple[bytes, list[tuple[bytes, str | None]]]:
    """Mostly one-line `data:` events with LF framing, as engines send them, now and then something else."""
    out: list[bytes] = []
    expected: list[tuple[bytes, str | None]] = []
    for _ in range(draw(st.integers(0, 12))):
        value = draw(_value).encode()
        kind = draw(st.integers(0, 9))
        if kind < 7:
            out.append(b"data: " + value + b"\n\n")
            expected.append((value, None))
        elif kind == 7:
            out.append(b": ping\n\n")
        elif kind == 8:
            out.append(b"event: error\ndata: " + value + b"\n\n")
            expected.append((value, "error"))
        else:
            out.append(b"data: " + value + b"\r\n\r\n")
            expected.append((value, None))
    return b"".join(out), expected


@settings(max_examples=400, deadline=None)
@given(engine_streams(), st.lists(st.integers(0, 400), max_size=30))
def test_payloads_of_one_line_events_are_the_events_feed_reads_under_any_split(
    stream: tuple[bytes, list[tuple[bytes, str | None]]], cuts: list[int]
) -> None:
    data, expected = stream
    assert _parse_payloads([data]) == expected
    assert _parse_payloads(_split(data, cuts)) == expected
    assert _parse_payloads([data[i : i + 1] for i in range(len(data))]) == expected


@settings(max_examples=400, deadline=None)
@given(streams(), st.lists(st.integers(0, 400), max_size=30))
def test_payloads_and_feed_raw_together_read_every_stream_as_feed_does(
    stream: tuple[bytes, list[SSEEvent]], cuts: list[int]
) -> None:
    data, expected = stream
    assert _parse_payloads(_split(data, cuts)) == [(e.data, e.event) for e in expected]


def test_an_unfinished_event_waits_in_the_buffer_and_answers_none_when_it_needs_the_full_parser() -> None:
    p = SSEParser()
    assert p.feed_payloads(b'data: {"a":1}\n\ndata: {"b"') == [b'{"a":1}']
    assert p.pending == len(b'data: {"b"')
    assert p.feed_payloads(b":2}\n\ndata: [DONE]\n\n") == [b'{"b":2}', b"[DONE]"]
    q = SSEParser()
    assert q.feed_payloads(b"data: x\n") == []
    assert q.feed_payloads(b": ping\n\n") is None and q.pending == len(b"data: x\n")  # untouched: feed_raw's turn
    assert [e[0] for e in q.feed_raw(b": ping\n\n")] == [b"x"]
