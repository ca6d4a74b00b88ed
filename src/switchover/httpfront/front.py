"""The HTTP/1.1 front the gateway and the review UI serve on: untrusted bytes in, one checked request at a time out
to a handler.

Requests are parsed by llhttp (through `httptools`, the parser behind uvicorn and Node), in its strict mode: bare CR
or LF, NUL and other control characters in the head, obs-fold, duplicate or non-digit Content-Length, Content-Length
with Transfer-Encoding, and bad chunk framing are parse errors. On top of it the front refuses what llhttp lets
through but a proxy must not: a Transfer-Encoding other than exactly `chunked` (and any in HTTP/1.0), HTTP versions
other than 1.0 / 1.1, upgrades and CONNECT, a missing or repeated Host, targets that are not origin-form
(wire/target.py), heads over `max_head_bytes` or `max_headers` however they arrive, bodies over
`max_body_bytes`. A refused request gets a 4xx with the gateway's error body and `Connection: close`, and the
connection is closed; the handler never sees it.

Time and connections are bounded (docs/gateway.md, Security model): the whole head must arrive within
`header_timeout_s` of its first byte and the body within `body_timeout_s` of the head (deadlines, not re-armed per
byte); an idle keep-alive connection is closed after `keepalive_timeout_s`; at most `max_connections` (and
`max_connections_per_client` per address) are open, the rest get 503 and are closed at once; request bodies held
in memory draw from the server's memory budget (budget.py) and are capped across connections. Pipelined requests
are answered in order; reading pauses while one waits. Chunked bodies are collected in linear time and memory: the
chunks are appended to one buffer as they arrive (sixteen million 1-byte chunks were once sixteen million objects).
A client that disconnects cancels its handler; a write to a closed connection raises ConnectionResetError (the relay
counts it as the client going away).
"""

from __future__ import annotations

import asyncio
import logging
from collections import deque
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any

import httptools

from switchover.httpfront.messages import FrontRequest, FrontStream, Headers, Reply, error_reply
from switchover.httpfront.writer import ReplyWriter
from switchover.wire.target import TargetError, parse_target

log = logging.getLogger("switchover.httpfront")

_METHODS = frozenset({"GET", "HEAD", "POST", "PUT", "DELETE", "PATCH", "OPTIONS"})
_PIPELINE_DEPTH = 16  # complete requests waiting behind the one being answered, at most
LINGER_S = 2.0  # after a refusal, how long what the client still sends is read and dropped before closing
LINGER_BYTES = 1 << 20  # ... and how much of it at most
RETRY_AFTER_S = "1"
# One connection's share of a loop turn: past this many body callbacks or bytes, the rest of the read is held back
# and reading pauses until the loop has run everything else that is ready (uvloop reads up to 32 x 256 KiB per
# readiness event: 1.4 million 1-byte chunks, which held /health for 1.3-2 s; one 256 KiB read is 43,000 of them).
BURST_CALLS = 2048
BURST_BYTES = 1 << 20
FEED_SLICE = 16 << 10  # bytes handed to the parser at once (at most ~2,700 1-byte chunks)


class Refusal(Exception):
    """A request the front answers itself: HTTP status, a message for the client, a metrics reason."""

    def __init__(self, status: int, message: str, reason: str) -> None:
        super().__init__(message)
        self.status = status
        self.reason = reason


if TYPE_CHECKING:
    from switchover.httpfront.listener import Front

Handler = Callable[[FrontRequest], Awaitable[Reply | FrontStream]]
RefusedHook = Callable[[str, int, "FrontRequest | None"], None]


class FrontConnection(ReplyWriter, asyncio.Protocol):
    """One client connection. Requests are parsed as bytes arrive and answered one at a time, in order."""

    def __init__(self, front: Front) -> None:
        self.front = front
        self.limits = front.limits
        self.transport: Any = None
        self.peer: str | None = None
        self.parser = httptools.HttpRequestParser(self)
        self.closed = False
        self.task: asyncio.Task[None] | None = None
        self.queue: deque[FrontRequest] = deque()
        self.streamed: FrontStream | None = None
        self.served = 0  # requests answered or being answered on this connection
        self.close_after = False  # the answer being written ends the connection
        self._counted = False
        self._timer: asyncio.TimerHandle | None = None
        self._timer_kind = ""
        self._drain: asyncio.Future[None] | None = None
        self._paused_writing = False
        self._paused_reading = False
        self._dead = False  # parsing stopped: answer what is queued (or the pending error), then close
        self._pending_error: Refusal | None = None
        # the message being parsed
        self._in_head = False
        self._head_bytes = 0  # sizes seen in callbacks (url, header lines)
        self._partial_head = 0  # bytes fed while a head was still incomplete
        self._completed = False  # a message ended during the current read
        self._lingering = False  # a refusal is out; reading (and dropping) until the client stops or time is up
        self._discarded = 0
        self._url = bytearray()
        self._headers = Headers()
        self._body: list[bytes] = []  # the body's first chunk; from the second on they are appended to _joined
        self._joined: bytearray | None = None
        self._body_size = 0
        self._req: FrontRequest | None = None  # head complete, body still arriving
        self._continue = False
        self._burst_calls = 0  # body callbacks and bytes since reading last yielded to the loop
        self._burst_bytes = 0
        self._yielding = False
        self._backlog: deque[bytes] = deque()  # read but not parsed yet: held back at the end of a burst

    # ---- asyncio.Protocol -----------------------------------------------------------------------------
    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = transport
        peer = transport.get_extra_info("peername")
        self.peer = peer[0] if isinstance(peer, tuple) else None
        front = self.front
        key = self.peer or "?"
        if front.closing_all:
            transport.close()
            return
        if len(front.conns) >= front.max_connections:
            self._refuse_connection("max_connections", "the gateway is at its connection limit; retry")
            return
        if front.per_peer.get(key, 0) >= self.limits.max_connections_per_client:
            self._refuse_connection("max_connections_per_client", "too many connections from your address")
            return
        front.conns.add(self)
        front.per_peer[key] = front.per_peer.get(key, 0) + 1
        self._counted = True
        self._arm("head", self.limits.header_timeout_s)  # a connection that sends nothing holds no slot for long

    def _refuse_connection(self, reason: str, message: str) -> None:
        self.front.refused(reason, 503)
        self._write_reply(error_reply(503, message, "overloaded"), None, keep=False)
        self.closed = True
        self.transport.close()

    def connection_lost(self, exc: Exception | None) -> None:
        self.closed = True
        self._release_body()
        while self.queue:
            self._release(len(self.queue.popleft().body))
        if self._counted:
            self._counted = False
            front = self.front
            front.conns.discard(self)
            key = self.peer or "?"
            left = front.per_peer.get(key, 1) - 1
            if left > 0:
                front.per_peer[key] = left
            else:
                front.per_peer.pop(key, None)
        self._disarm()
        if self.task is not None and not self.task.done():
            self.task.cancel()  # the client went away: its handler stops (and cancels its upstream request)
        self._wake()

    def eof_received(self) -> bool:
        """The client closed its side: taken as leaving (a handler still running is cancelled, which stops the
        engine's work), as uvicorn and aiohttp do. Answers already written (a refusal) still go out."""
        return False

    def data_received(self, data: bytes) -> None:
        if self._dead or self.closed:
            self._discarded += len(data)
            if self._lingering and self._discarded > LINGER_BYTES:
                self._finish_idle()
            return
        if self._backlog:  # bytes held back from an earlier read are parsed first: order is kept
            self._backlog.append(data)
            return
        self._feed(data)

    def _feed(self, data: bytes) -> None:
        """Parse `data` in slices; past the connection's share of a loop turn the rest is held back (reading
        paused) and parsed on the next turn, so no read, however many chunks it holds, keeps the loop long."""
        for pos in range(0, len(data), FEED_SLICE):
            if self._dead or self.closed:
                return
            self._feed_slice(data[pos : pos + FEED_SLICE] if len(data) > FEED_SLICE else data)
            if (self._burst_calls > BURST_CALLS or self._burst_bytes > BURST_BYTES) and not self._dead:
                rest = data[pos + FEED_SLICE :]
                if rest:
                    self._backlog.appendleft(rest)  # before anything read later
                if not self._yielding and not self.closed:
                    self._yielding = True
                    self.transport.pause_reading()
                    asyncio.get_running_loop().call_soon(self._end_burst)
                return

    def _end_burst(self) -> None:
        """The next turn: parse what was held back, then resume reading (unless a queued request or a close
        holds it)."""
        self._yielding = False
        self._burst_calls = self._burst_bytes = 0
        while self._backlog and not self._yielding and not self._dead and not self.closed:
            self._feed(self._backlog.popleft())
        if self._dead or self.closed:
            self._backlog.clear()
            return
        if not self._yielding and not self._paused_reading and self.transport is not None:
            self.transport.resume_reading()

    def _feed_slice(self, data: bytes) -> None:
        self._completed = False
        self._burst_bytes += len(data)
        try:
            self.parser.feed_data(data)
        except Refusal as exc:
            self._refuse(exc)
            return
        except httptools.HttpParserUpgrade:
            self._refuse(Refusal(400, "protocol upgrades are not supported", "upgrade"))
            return
        except httptools.HttpParserCallbackError as exc:
            cause = exc.__context__ or exc.__cause__
            if isinstance(cause, Refusal):
                self._refuse(cause)
            else:  # a bug in a callback: say so, but the client only learns it was refused
                log.error("request parser callback failed: %s", type(cause).__name__ if cause else exc)
                self._refuse(Refusal(400, "malformed request", "bad_request"))
            return
        except httptools.HttpParserError as exc:
            text = _parser_message(exc)
            if "HTTP version" in text:
                self._refuse(Refusal(505, "HTTP/1.1 or HTTP/1.0 only", "version"))
            else:
                self._refuse(Refusal(400, f"malformed request: {text}", "bad_request"))
            return
        if self._in_head:
            # a head still arriving: every byte of this read is part of it, unless an earlier message ended in
            # this same read (then its share is unknown, at most this read, and only later reads are counted)
            self._partial_head = 0 if self._completed else self._partial_head + len(data)
            if self._partial_head > self.limits.max_head_bytes:
                self._refuse(Refusal(431, f"request head over {self.limits.max_head_bytes} bytes", "head_too_large"))
        else:
            self._partial_head = 0

    # ---- llhttp callbacks ----------------------------------------------------------------------------
    def on_message_begin(self) -> None:
        if len(self.queue) >= _PIPELINE_DEPTH:
            raise Refusal(429, "too many pipelined requests", "pipeline_depth")
        self._in_head = True
        self._head_bytes = 0
        self._url = bytearray()
        self._headers = Headers()
        self._body = []
        self._joined = None
        self._body_size = 0
        if self.task is None and self._timer_kind != "head":
            self._arm("head", self.limits.header_timeout_s)

    def on_url(self, url: bytes) -> None:
        self._url += url
        self._grow_head(len(url))

    def on_header(self, name: bytes, value: bytes) -> None:
        if not self._in_head:
            return  # a trailer field after a chunked body: not kept, not forwarded
        self._grow_head(len(name) + len(value) + 4)
        headers = self._headers
        if len(headers.items) >= self.limits.max_headers:
            raise Refusal(431, f"more than {self.limits.max_headers} header lines", "head_too_large")
        headers.add(name.decode("latin-1"), value.decode("latin-1"))

    def _grow_head(self, n: int) -> None:
        self._head_bytes += n
        if self._head_bytes > self.limits.max_head_bytes:
            raise Refusal(431, f"request head over {self.limits.max_head_bytes} bytes", "head_too_large")

    def on_headers_complete(self) -> None:
        self._in_head = False
        self._partial_head = 0
        parser = self.parser
        version = parser.get_http_version()
        if version not in ("1.1", "1.0"):
            raise Refusal(505, f"HTTP/{version} is not supported; use HTTP/1.1", "version")
        method = parser.get_method().decode("ascii", "replace")
        if method not in _METHODS:
            raise Refusal(405, f"method {method} is not allowed", "method")
        h = self._headers
        conn = h.get("connection")
        if (
            parser.should_upgrade()
            or "upgrade" in h
            or (conn is not None and "upgrade" in (t.strip().lower() for t in conn.split(",")))
        ):
            raise Refusal(400, "protocol upgrades are not supported", "upgrade")
        te = h.get("transfer-encoding")
        if te is not None and (version == "1.0" or te.strip().lower() != "chunked" or h.count("transfer-encoding") > 1):
            raise Refusal(400, "Transfer-Encoding must be exactly 'chunked' (HTTP/1.1 only)", "bad_request")
        if h.count("host") != 1 and (version == "1.1" or "host" in h):
            raise Refusal(400, "exactly one Host header is required", "bad_request")
        try:
            target = parse_target(bytes(self._url))
        except TargetError as exc:
            raise Refusal(exc.status, str(exc), "target") from None
        length = h.get("content-length")
        if length is not None and int(length) > self.limits.max_body_bytes:
            raise Refusal(413, f"request body over {self.limits.max_body_bytes} bytes", "body_too_large")
        expect = h.get("expect")
        if expect is not None and expect.strip().lower() != "100-continue":
            raise Refusal(417, f"Expect: {expect[:40]!r} is not supported", "bad_request")
        has_body = te is not None or (length is not None and int(length) > 0)
        self._continue = expect is not None and has_body
        self._req = FrontRequest(self, method, target, version, h, b"", parser.should_keep_alive())
        if self.task is None and not self.queue:
            if has_body:
                self._arm("body", self.limits.body_timeout_s)
                self._send_continue()
            else:
                self._disarm()

    def on_body(self, body: bytes) -> None:
        n = len(body)
        self._burst_calls += 1
        self._body_size += n
        if self._body_size > self.limits.max_body_bytes:
            raise Refusal(413, f"request body over {self.limits.max_body_bytes} bytes", "body_too_large")
        budget = self.front.budget
        if budget.by_kind["request_body"] + n > self.limits.max_buffered_body_bytes or not budget.take(
            "request_body", n
        ):
            raise Refusal(503, "the gateway holds too many request bodies; retry", "body_memory")
        if self._joined is not None:
            self._joined += body
        elif self._body:
            self._joined = bytearray(self._body[0])
            self._joined += body
            self._body = []
        else:
            self._body = [body]

    def on_message_complete(self) -> None:
        self._completed = True
        req, self._req = self._req, None
        if req is None:  # pragma: no cover - llhttp always completes the head first
            raise Refusal(400, "malformed request", "bad_request")
        joined, self._joined = self._joined, None
        req.body = bytes(joined) if joined is not None else self._body[0] if self._body else b""
        self._body = []
        self.queue.append(req)
        if self.task is None:
            self._disarm()
            self._start_next()
        elif not self._paused_reading and self.transport is not None:
            self._paused_reading = True
            self.transport.pause_reading()  # one waits already: read no further until it is answered

    # ---- answering -----------------------------------------------------------------------------------
    def keep_after(self, request: FrontRequest) -> bool:
        """Whether the connection stays open after this request's answer."""
        return (
            request.keep_alive
            and not self._dead
            and not self.front.closing_all
            and self.served < self.limits.keepalive_requests
        )

    def _start_next(self) -> None:
        req = self.queue.popleft()
        self.served += 1
        if not self.queue and self._paused_reading and not self.closed:
            self._paused_reading = False
            self.transport.resume_reading()
        self.task = asyncio.ensure_future(self._run(req))

    async def _run(self, request: FrontRequest) -> None:
        self.streamed = None
        self.close_after = False
        keep = self.keep_after(request)
        try:
            resp = await self.front.handler(request)
            if self.streamed is None:
                if not isinstance(resp, Reply):  # pragma: no cover - every handler returns a Reply or streams
                    raise TypeError(f"handler returned {type(resp).__name__}")
                keep = keep and resp.headers.get("Connection") != "close"
                self._write_reply(resp, request, keep)
            elif self.close_after:
                keep = False
        except asyncio.CancelledError:
            keep = False
            if not self.closed:
                raise
        except ConnectionResetError:
            keep = False
        except Exception:
            log.exception("unhandled error in the gateway front")
            keep = False
            if self.streamed is None and not self.closed:
                self._write_reply(error_reply(500, "internal error", "internal_error"), request, False)
        finally:
            self.task = None
            self._release(len(request.body))
        if self.closed:
            return
        if not keep:
            self._linger()  # the client may have sent more (pipelined): a plain close could reset the answer
            return
        self._after_exchange()

    def _after_exchange(self) -> None:
        """The next step once an answer is out: the next queued request, a refusal held back, or waiting."""
        if self.queue:
            self._start_next()
        elif self._pending_error is not None:
            err, self._pending_error = self._pending_error, None
            self._send_refusal(err)
        elif self._dead:
            self._linger()
        elif self._req is not None:  # the next request's body is arriving
            self._arm("body", self.limits.body_timeout_s)
            self._send_continue()
        elif self._in_head:
            self._arm("head", self.limits.header_timeout_s)
        else:
            self._arm("idle", self.limits.keepalive_timeout_s)

    def _finish_idle(self) -> None:
        if self.transport is not None and not self.closed:
            self.closed = True
            self.transport.close()

    # ---- refusals and deadlines ----------------------------------------------------------------------
    def _refuse(self, err: Refusal) -> None:
        """Stop parsing; answer `err` now, or after the requests already queued (answers stay in order)."""
        self._dead = True
        self._release_body()
        if self.task is not None or self.queue:
            if err.reason == "pipeline_depth":  # the queued ones are answered, then the connection closes
                self.front.refused(err.reason, err.status, None)
            else:
                self._pending_error = err
            return
        self._send_refusal(err)

    def _send_refusal(self, err: Refusal) -> None:
        request = self._req
        self._req = None
        self.front.refused(err.reason, err.status, request)
        kind = "invalid_request_error" if err.status < 500 else "overloaded"
        reply = error_reply(err.status, str(err), kind)
        if err.status == 503:
            reply.headers["Retry-After"] = RETRY_AFTER_S  # a full budget or table empties as requests end
        self._write_reply(reply, None, keep=False)
        self._linger()

    def _linger(self) -> None:
        """Close after a refusal without losing it: closing a socket with unread bytes makes the kernel send a
        reset, which can destroy the answer before the client reads it. So the write side is shut, and what the
        client still sends is read and dropped until it closes, LINGER_S pass or LINGER_BYTES arrive (nginx's
        lingering close)."""
        self._dead = True
        self._disarm()
        transport = self.transport
        if transport is None or self.closed:
            return
        if not transport.can_write_eof():
            self._finish_idle()
            return
        transport.write_eof()
        self._lingering = True
        self._arm("linger", LINGER_S)

    def _release_body(self) -> None:
        if self._joined is not None:
            self._release(len(self._joined))
        elif self._body:
            self._release(len(self._body[0]))
        self._body = []
        self._joined = None

    def _release(self, n: int) -> None:
        self.front.budget.give("request_body", n)

    def _arm(self, kind: str, seconds: float) -> None:
        self._disarm()
        self._timer_kind = kind
        self._timer = asyncio.get_running_loop().call_later(seconds, self._expired, kind)

    def _disarm(self) -> None:
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        self._timer_kind = ""

    def _expired(self, kind: str) -> None:
        self._timer = None
        self._timer_kind = ""
        if self.closed or self.task is not None:
            return
        if kind in ("idle", "linger") or (kind == "head" and not self._in_head and self._req is None):
            self._finish_idle()  # nothing was asked: close without a word, as nginx does
            return
        what = "request head" if kind == "head" else "request body"
        limit = self.limits.header_timeout_s if kind == "head" else self.limits.body_timeout_s
        self._dead = True
        self._release_body()
        self._send_refusal(Refusal(408, f"the {what} did not arrive within {limit:g} s", f"{kind}_timeout"))


def _parser_message(exc: Exception) -> str:
    text = str(exc) or type(exc).__name__
    return text[:120]
