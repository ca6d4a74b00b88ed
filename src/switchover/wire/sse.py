"""Incremental Server-Sent Events parser, correct under any split of the byte stream.

Follows the WHATWG event-stream rules that matter for LLM servers: lines end in LF, CRLF or CR (a CR at
the end of one read and an LF at the start of the next are one terminator); lines starting with ':' are
comments; several `data:` lines of one event are joined with '\n'; one space after the colon is dropped;
a blank line dispatches the event. Data is kept as bytes so the JSON parser can read it without a copy.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from functools import partial
from typing import NamedTuple

_LINE_END = re.compile(rb"\r\n|\r|\n")


class SSEEvent(NamedTuple):
    """One dispatched event (a NamedTuple: immutable like before, and three times cheaper to create than a frozen
    dataclass, which matters at one per streamed token)."""

    data: bytes
    event: str | None = None
    id: str | None = None


_new_event = partial(tuple.__new__, SSEEvent)  # SSEEvent(...) without the Python-level __new__: per token


class SSEParser:
    """Feed bytes as they arrive; get back the events they complete."""

    __slots__ = ("_buf", "_comments", "_data", "_event", "_id", "_skip_lf")

    def __init__(self) -> None:
        self._buf = b""
        self._skip_lf = False
        self._data: list[bytes] = []
        self._event: str | None = None
        self._id: str | None = None
        self._comments = 0

    @property
    def pending(self) -> int:
        """Bytes held for an event not finished yet (a client bounds it: wire.Timeouts.max_body)."""
        return len(self._buf) + sum(map(len, self._data)) if self._data else len(self._buf)

    @property
    def comments(self) -> int:
        """Comment lines seen so far (keep-alives such as ': ping')."""
        return self._comments

    def feed_raw(self, chunk: bytes) -> Sequence[tuple[bytes, str | None, str | None]]:
        """`feed` for the load generator's hot path: the common one-line events come back as plain (data, event,
        id) tuples (cheaper to build than SSEEvent; wire.fold reads either), anything else as `feed` returns it."""
        if self._skip_lf or self._buf or self._data or self._event is not None or b"\r" in chunk:
            return self.feed(chunk)
        payloads = _one_line_data(chunk) if chunk[-2:] == b"\n\n" else None
        if payloads is not None:
            ident = self._id
            none: str | None = None
            return [(d, none, ident) for d in payloads]
        return self.feed(chunk)

    def feed_payloads(self, chunk: bytes) -> list[bytes] | None:
        """`feed` for streams of one-line `data:` events with LF framing (what engines send): the payloads of the
        events this read completed (an unfinished last event stays buffered, raw, as `feed` keeps it); None, with
        the parser untouched, for anything else (CR, comments, other fields, several data lines), which `feed_raw`
        must then see. Only the data comes back: such events carry neither an `event:` type nor an `id:`."""
        if self._skip_lf or self._data or self._event is not None or b"\r" in chunk or b"\r" in self._buf:
            return None
        buf = self._buf + chunk if self._buf else chunk
        cut = buf.rfind(b"\n\n") + 2
        if cut < 2:  # no event finished in this read: the bytes wait for the rest
            self._buf = buf
            return []
        payloads = _one_line_data(buf[:cut] if cut < len(buf) else buf)
        if payloads is None:
            return None
        self._buf = buf[cut:]
        return payloads

    def feed(self, chunk: bytes) -> list[SSEEvent]:
        """Parse one read; returns the events it completed (possibly none)."""
        if not chunk:
            return []
        if self._skip_lf:
            self._skip_lf = False
            if chunk[:1] == b"\n":
                chunk = chunk[1:]
                if not chunk:
                    return []
        buf = self._buf + chunk if self._buf else chunk
        if b"\r" not in buf and not self._data and self._event is None:
            return self._feed_lf_blocks(buf)
        if b"\r" in buf:
            lines = _LINE_END.split(buf)
            if buf.endswith(b"\r"):
                self._skip_lf = True  # the LF of a CRLF may arrive in the next read
        else:
            lines = buf.split(b"\n")
        self._buf = lines.pop()
        events: list[SSEEvent] = []
        for line in lines:
            self._line(line, events)
        return events

    def _feed_lf_blocks(self, buf: bytes) -> list[SSEEvent]:
        """Fast path for LF-only streams between events: split on blank lines; the unfinished tail stays raw
        in the buffer and is parsed again when the rest of its event arrives."""
        blocks = buf.split(b"\n\n")
        self._buf = tail = blocks.pop()
        n = len(blocks)
        if n:
            payloads = _one_line_data(buf[: len(buf) - len(tail)] if tail else buf)
            if payloads is not None:
                new, ident = _new_event, self._id
                return [new((d, None, ident)) for d in payloads]
        events: list[SSEEvent] = []
        for block in blocks:
            if block[:6] == b"data: " and b"\n" not in block:
                events.append(_new_event((block[6:], None, self._id)))  # the common one-line event
                continue
            for line in block.split(b"\n"):
                self._line(line, events)
            self._line(b"", events)
        return events

    def finish(self) -> list[SSEEvent]:
        """End of stream: a last event that lacked its blank line is still dispatched."""
        events: list[SSEEvent] = []
        if self._buf:
            for line in _LINE_END.split(self._buf):
                self._line(line, events)
            self._buf = b""
        self._line(b"", events)
        return events

    def _line(self, line: bytes, events: list[SSEEvent]) -> None:
        if not line:
            if self._data:
                events.append(SSEEvent(b"\n".join(self._data), self._event, self._id))
                self._data = []
            self._event = None
            return
        if line[0] == 0x3A:  # ':' comment
            self._comments += 1
            return
        name, sep, value = line.partition(b":")
        if sep and value[:1] == b" ":
            value = value[1:]
        if name == b"data":
            self._data.append(value)
        elif name == b"event":
            self._event = value.decode("utf-8", "replace")
        elif name == b"id" and b"\x00" not in value:
            self._id = value.decode("utf-8", "replace")
        # 'retry' and unknown fields are ignored, as the spec says


def whole_events(chunk: bytes) -> list[SSEEvent] | None:
    """The events of a read that holds only whole one-line `data: ...` events with LF framing (what engines send),
    as an SSEParser that holds no partial event would return them; None for anything else (a partial event, CR,
    comments, several data lines, other fields), which an SSEParser must then see."""
    if chunk[-2:] != b"\n\n" or b"\r" in chunk:
        return None
    payloads = _one_line_data(chunk)
    return None if payloads is None else [_new_event((d, None, None)) for d in payloads]


def _one_line_data(whole: bytes) -> list[bytes] | None:
    """The payloads when `whole` (ending in LF LF, no CR) is nothing but one-line `data: ...` events (what engines
    send); else None. One split and one count: k + 1 payloads split at 'LF LF data: ' and no LF but the 2(k + 1)
    of their ends mean exactly k + 1 such events, and the payloads come out of the split unsliced."""
    if whole[:6] != b"data: ":
        return None
    payloads = whole[6:-2].split(b"\n\ndata: ")
    return payloads if whole.count(b"\n") == 2 * len(payloads) else None


def parse_all(chunks: list[bytes]) -> list[SSEEvent]:
    """Parse a whole stream given as reads (for tests and offline recomputation)."""
    parser = SSEParser()
    events: list[SSEEvent] = []
    for c in chunks:
        events.extend(parser.feed(c))
    events.extend(parser.finish())
    return events
