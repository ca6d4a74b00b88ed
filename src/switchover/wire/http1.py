"""Incremental HTTP/1.x response parsing for both HTTP/1.1 clients (raw_http, passthrough): status line, headers,
and a Content-Length, chunked or read-until-close body, correct under any split of the bytes. Pure (no sockets),
so it is property-tested alone."""

from __future__ import annotations

import re

_MAX_HEAD = 65536  # status line + headers
_MAX_LINE = 4096  # one chunk-size or trailer line

# a whole chunk-size line: hex size, optional extensions (ignored), CRLF (a bare LF is tolerated)
_CHUNK_LINE = re.compile(rb"([0-9A-Fa-f]{1,15})[ \t]*(?:;[^\r\n]*)?\r?\n").match

# parser states
_HEAD, _LENGTH, _SIZE, _DATA, _DATA_END, _TRAILER, _UNTIL_CLOSE, _DONE = range(8)


class HttpProtocolError(Exception):
    """The bytes are not an HTTP/1.x response we can read."""


class ResponseParser:
    """Incremental HTTP/1.x response parser: status line, headers, then a Content-Length, chunked or
    read-until-close body. `feed(data)` returns the body bytes that `data` completed; correct under any split."""

    __slots__ = ("_buf", "_left", "_no_body", "_state", "done", "extra", "headers", "keep_alive", "status")

    def __init__(self, *, no_body: bool = False) -> None:
        self._no_body = no_body  # the request was a HEAD: the final head ends the response
        self._buf = b""
        self._state = _HEAD
        self._left = 0
        self.status: int | None = None  # set once the final (non-1xx) head is parsed
        self.headers: dict[str, str] = {}  # lower-cased names; repeated headers joined with ', '
        self.keep_alive = False
        self.done = False
        self.extra = False  # bytes after the end of the response (the connection cannot be reused)

    @property
    def reads_until_close(self) -> bool:
        return self._state == _UNTIL_CLOSE

    def feed(self, data: bytes) -> bytes:
        if self._buf:
            data = self._buf + data
            self._buf = b""
        out: list[bytes] = []
        pos = self._advance(data, out)
        if pos < len(data):
            self._buf = data[pos:]
        if not out:
            return b""
        return out[0] if len(out) == 1 else b"".join(out)

    def _advance(self, data: bytes, out: list[bytes]) -> int:
        """Parse as far as `data` goes, appending body bytes to `out`; returns the position parsing stopped at."""
        pos = 0
        end = len(data)
        state = self._state
        while pos < end:
            if state == _SIZE:  # the hot path: a whole chunk is usually here in one read
                got = self._chunk(data, pos, end, out)
                if got is None:  # the size line is not all here yet
                    break
                state, pos = got
            elif state in (_DATA, _LENGTH):  # a chunk's data, or a Content-Length body
                take = self._left if self._left < end - pos else end - pos
                out.append(data[pos : pos + take])
                pos += take
                self._left -= take
                if self._left == 0:
                    state = _DATA_END if state == _DATA else _DONE
            elif state == _DATA_END:
                nxt = _after_crlf(data, pos, end)
                if nxt == pos:
                    break
                pos, state = nxt, _SIZE
            elif state == _TRAILER:
                nxt, blank = _trailer_line(data, pos, end)
                if nxt == pos:
                    break
                pos, state = nxt, (_DONE if blank else _TRAILER)
            elif state == _UNTIL_CLOSE:
                out.append(data[pos:] if pos else data)
                pos = end
            elif state == _HEAD:
                state, nxt = self._head(data, pos)
                if nxt == pos:  # the head is not all here yet
                    break
                pos = nxt
            else:  # _DONE: nothing may follow a response we did not ask for
                self.extra = True
                pos = end
        if state == _DONE:
            self.done = True
        self._state = state
        return pos

    def _chunk(self, data: bytes, pos: int, end: int, out: list[bytes]) -> tuple[int, int] | None:
        """A chunk-size line and, when it is all here, the chunk: (new state, new position); None when the size
        line is not all here yet."""
        got = _size_line(data, pos, end)
        if got is None:
            return None
        size, pos = got
        if not size:
            return _TRAILER, pos
        if data.startswith(b"\r\n", pos + size):  # the whole chunk is here: take it in one step
            out.append(data[pos : pos + size])
            return _SIZE, pos + size + 2
        self._left = size
        return _DATA, pos

    def eof(self) -> None:
        """The peer closed: a read-until-close body is now complete; anything else is cut short."""
        if self._state == _UNTIL_CLOSE:
            self._state = _DONE
            self.done = True

    def _head(self, data: bytes, pos: int) -> tuple[int, int]:
        """Parse one head if all of it is there; returns (new state, new position)."""
        stop = data.find(b"\n\r\n", pos)
        stop2 = data.find(b"\n\n", pos)
        if stop < 0 or (0 <= stop2 < stop):
            stop, skip = stop2, 2
        else:
            skip = 3
        if stop < 0:
            if len(data) - pos > _MAX_HEAD:
                raise HttpProtocolError("response head too large")
            return _HEAD, pos
        nxt = stop + skip
        version, status, headers = _parse_head(data[pos:stop].decode("latin-1").split("\n"))
        if 100 <= status < 200 and status != 101:  # 100 Continue, 103 Early Hints: a final head follows
            return _HEAD, nxt
        self.status = status
        self.headers = headers
        conn = headers.get("connection", "").lower()
        self.keep_alive = "close" not in conn if version != "HTTP/1.0" else "keep-alive" in conn
        if status == 101:  # the connection now speaks another protocol
            self.keep_alive = False
            return _DONE, nxt
        if status in (204, 304) or self._no_body:  # no body
            return _DONE, nxt
        state, self._left = _framing(headers)
        if state == _UNTIL_CLOSE:
            self.keep_alive = False
        return state, nxt


def _size_line(data: bytes, pos: int, end: int) -> tuple[int, int] | None:
    """A chunk-size line at `pos`: (size, position after it); None when it is not all here yet."""
    eol = data.find(b"\r\n", pos, pos + 17)
    line = data[pos:eol]
    if eol > pos and line.isalnum():  # the usual 'hex CRLF', without the regex
        try:
            return int(line, 16), eol + 2
        except ValueError:
            raise HttpProtocolError(f"bad chunk size {line!r}") from None
    m = _CHUNK_LINE(data, pos)  # extensions, a bare LF, or a line not all here yet
    if m is None:
        if data.find(b"\n", pos) >= 0:
            raise HttpProtocolError(f"bad chunk-size line {data[pos : pos + 40]!r}")
        if end - pos > _MAX_LINE:
            raise HttpProtocolError("chunk-size line too long")
        return None
    return int(m.group(1), 16), m.end()


def _after_crlf(data: bytes, pos: int, end: int) -> int:
    """The position after the CRLF (or bare LF) that ends a chunk's data; `pos` when it is not all here yet."""
    if data[pos] == 0x0A:  # bare LF, tolerated
        return pos + 1
    if data[pos] == 0x0D:
        if end - pos < 2:
            return pos
        if data[pos + 1] == 0x0A:
            return pos + 2
    raise HttpProtocolError("chunk not followed by CRLF")


def _trailer_line(data: bytes, pos: int, end: int) -> tuple[int, bool]:
    """(position after one trailer line, whether it was the blank line that ends them); `pos` when not all here."""
    eol = data.find(b"\n", pos)
    if eol < 0:
        if end - pos > _MAX_LINE:
            raise HttpProtocolError("trailer line too long")
        return pos, False
    return eol + 1, not data[pos:eol].strip()


def _parse_head(lines: list[str]) -> tuple[str, int, dict[str, str]]:
    """The status line and header lines: (HTTP version, status, lower-cased headers with repeats joined)."""
    status_line = lines[0].rstrip("\r")
    parts = status_line.split(" ", 2)
    if len(parts) < 2 or not parts[0].startswith("HTTP/1.") or len(parts[1]) != 3 or not parts[1].isdigit():
        raise HttpProtocolError(f"bad status line {status_line[:80]!r}")
    headers: dict[str, str] = {}
    for raw in lines[1:]:
        name, sep, value = raw.rstrip("\r").partition(":")
        if not sep or not name or name != name.strip():
            raise HttpProtocolError(f"bad header line {raw[:80]!r}")
        key = name.lower()
        value = value.strip()
        headers[key] = f"{headers[key]}, {value}" if key in headers else value
    return parts[0], int(parts[1]), headers


def _framing(headers: dict[str, str]) -> tuple[int, int]:
    """How the body of a response that has one ends: (state, Content-Length bytes left)."""
    te = headers.get("transfer-encoding", "").lower()
    if te:
        codings = te.replace(" ", "").replace("\t", "").split(",")
        if codings[-1] != "chunked":
            return _UNTIL_CLOSE, 0
        if len(codings) > 1:
            raise HttpProtocolError(f"transfer coding {te[:40]!r} not supported")
        return _SIZE, 0
    cl = headers.get("content-length")
    if cl is None:
        return _UNTIL_CLOSE, 0
    if not cl.isdigit():
        values = {v.strip() for v in cl.split(",")}
        if len(values) != 1 or not next(iter(values)).isdigit():
            raise HttpProtocolError(f"bad Content-Length {cl[:40]!r}")
        cl = values.pop()
    left = int(cl)
    return (_LENGTH if left else _DONE), left


class LlhttpResponseParser:
    """ResponseParser's interface and results over llhttp (httptools, C), for the load generator's hot path: a
    64-event chunked stream costs about a sixth of the pure-Python parse. Responses to HEAD are not supported
    (the generation client only POSTs; the gateway's pass-through keeps ResponseParser)."""

    __slots__ = (
        "_body",
        "_fallback",
        "_fed",
        "_history",
        "_interim",
        "_p",
        "_returned",
        "done",
        "extra",
        "headers",
        "keep_alive",
        "status",
    )

    def __init__(self) -> None:
        import httptools

        self._p: httptools.HttpResponseParser | None = httptools.HttpResponseParser(self)
        self._body: list[bytes] = []
        self._fed = 0  # bytes so far
        self._history: list[bytes] | None = []  # the first bytes, replayed into ResponseParser if llhttp refuses them
        self._returned = 0  # body bytes handed out
        self._fallback: ResponseParser | None = None
        self._interim = False
        self.status: int | None = None
        self.headers: dict[str, str] = {}
        self.keep_alive = False
        self.done = False
        self.extra = False

    # llhttp callbacks
    def on_message_begin(self) -> None:
        if self.done:
            self.extra = True

    def on_header(self, name: bytes, value: bytes) -> None:
        if self.done:
            return
        key = name.decode("latin-1").lower()
        text = value.decode("latin-1").strip()
        h = self.headers
        h[key] = f"{h[key]}, {text}" if key in h else text

    def on_headers_complete(self) -> None:
        if self.done or self._p is None:
            return
        code = self._p.get_status_code()
        if 100 <= code < 200 and code != 101:  # 100 Continue, 103 Early Hints: a final head follows
            self._interim = True
            self.headers = {}
            return
        self.status = code
        self.keep_alive = bool(self._p.should_keep_alive()) and code != 101

    def on_body(self, body: bytes) -> None:
        if not self.done:
            self._body.append(body)

    def on_message_complete(self) -> None:
        if self._interim:
            self._interim = False
            return
        self.done = True
        self._history = None  # complete: nothing will be replayed

    @property
    def reads_until_close(self) -> bool:
        """The body ends when the peer closes (neither Content-Length nor chunked)."""
        if self._fallback is not None:
            return self._fallback.reads_until_close
        if self.status is None or self.done or self.status in (204, 304):
            return False
        te = self.headers.get("transfer-encoding", "").replace(" ", "").lower()
        if te.endswith("chunked"):
            return False
        return te != "" or "content-length" not in self.headers

    def feed(self, data: bytes) -> bytes:
        """The body bytes `data` completed; HttpProtocolError when the bytes are not an HTTP/1.x response.
        Where llhttp is stricter than RFC 9112 (e.g. whitespace before a chunk extension's ';'), the first 64 KiB
        are replayed into ResponseParser, which then reads the rest."""
        if self._fallback is not None:
            return self._from_fallback(data)
        if self.done:  # nothing may follow a response we did not ask for
            self.extra = self.extra or bool(data)
            return b""
        import httptools

        self._fed += len(data)
        if self._history is not None:
            self._history.append(data)
            if self._fed > _MAX_HEAD:
                self._history = None
        if self.status is None and self._fed > _MAX_HEAD:
            raise HttpProtocolError("response head too large")
        if self._p is None:
            raise HttpProtocolError("the parser was released")
        try:
            self._p.feed_data(data)
        except httptools.HttpParserUpgrade:
            self.done = True
            self.keep_alive = False
        except httptools.HttpParserError as exc:
            if self.done:
                self.extra = True  # garbage after a complete response: the connection is unusable, the answer stands
            elif self._history is not None:
                return self._replay()
            else:
                raise HttpProtocolError(str(exc) or type(exc).__name__) from None
        body = self._body
        if not body:
            return b""
        self._body = []
        out = body[0] if len(body) == 1 else b"".join(body)
        self._returned += len(out)
        return out

    def release(self) -> None:
        """Drop llhttp and the kept bytes: the C parser holds this object's callbacks (a reference cycle that
        otherwise waits for a full garbage collection, with up to 64 KiB of response kept alive)."""
        self._p = None
        self._history = None

    def _replay(self) -> bytes:
        """Hand everything fed so far to ResponseParser; return the body bytes not handed out yet."""
        fb = self._fallback = ResponseParser()
        history, self._history, self._body = self._history or [], None, []
        body = b"".join(fb.feed(piece) for piece in history)  # HttpProtocolError if it refuses them too
        self._sync()
        out, self._returned = body[self._returned :], len(body)
        return out

    def _from_fallback(self, data: bytes) -> bytes:
        assert self._fallback is not None
        out = self._fallback.feed(data)
        self._sync()
        self._returned += len(out)
        return out

    def _sync(self) -> None:
        fb = self._fallback
        assert fb is not None
        self.status, self.headers, self.keep_alive = fb.status, fb.headers, fb.keep_alive
        self.done, self.extra = fb.done, fb.extra

    def eof(self) -> None:
        """The peer closed: a read-until-close body is now complete; anything else is cut short."""
        if self._fallback is not None:
            self._fallback.eof()
            self._sync()
        elif self.reads_until_close:
            self.done = True
            self.keep_alive = False
