"""The gateway's own HTTP/1.1 front: an asyncio protocol that parses requests and writes responses itself.

aiohttp's server costs 0.12-0.16 ms of latency per request over a minimal protocol (bench/http_server_floor.py),
about a third of what the gateway adds; its low-level server saves almost none of it. This front keeps what the
gateway needs and no more: Content-Length and chunked request bodies, `Expect: 100-continue`, keep-alive (HTTP/1.1
by default, HTTP/1.0 on request), responses from `web.Response` objects (the handlers are unchanged) and streamed
responses in chunked encoding with write back-pressure. A client that disconnects cancels its handler (as
aiohttp's `handler_cancellation`), and a write to a closed connection raises ConnectionResetError, which the relay
counts as the client going away.
"""

from __future__ import annotations

import asyncio
import contextlib
import http
import logging
from collections.abc import Awaitable, Callable
from typing import Any

import orjson
from aiohttp import web
from multidict import CIMultiDict, CIMultiDictProxy

log = logging.getLogger("switchover.gateway")

MAX_HEAD = 64 << 10
IDLE_S = 75.0  # a connection with no request in progress and no bytes for this long is closed (aiohttp's default)
_REASONS = {s.value: s.phrase for s in http.HTTPStatus}


def error_response(status: int, message: str, kind: str) -> web.Response:
    """The gateway's one error body (OpenAI's shape), for both servers and every handler."""
    body = orjson.dumps({"error": {"message": message, "type": kind, "code": status}})
    return web.Response(status=status, body=body, content_type="application/json")


class BadRequest(Exception):
    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status = status


class FrontRequest:
    """The parts of aiohttp's Request the gateway's handlers use."""

    __slots__ = ("_body", "_conn", "headers", "keep_alive", "method", "path", "path_qs", "query_string", "version")

    def __init__(self, conn: FrontConnection, method: str, target: str, version: str,
                 headers: CIMultiDict[str], body: bytes, keep_alive: bool) -> None:
        self._conn = conn
        self.method = method
        self.path_qs = target
        self.path, _, self.query_string = target.partition("?")
        self.version = version
        self.headers = CIMultiDictProxy(headers)
        self._body = body
        self.keep_alive = keep_alive

    async def read(self) -> bytes:
        return self._body

    @property
    def remote(self) -> str | None:
        peer = self._conn.transport.get_extra_info("peername") if self._conn.transport else None
        return peer[0] if isinstance(peer, tuple) else None

    def open_stream(self, status: int, headers: dict[str, str]) -> FrontStream:
        return FrontStream(self._conn, self, status, headers)


class FrontStream:
    """A streamed response on the front (chunked encoding); the status line and headers go with the first write.
    Same calls as aiohttp's StreamResponse as the relay uses it: write(), write_eof()."""

    __slots__ = ("_conn", "_head", "status")

    def __init__(self, conn: FrontConnection, request: FrontRequest, status: int, headers: dict[str, str]) -> None:
        self._conn = conn
        self.status = status
        lines = [f"HTTP/1.1 {status} {_REASONS.get(status, 'Unknown')}"]
        lines += [f"{k}: {v}" for k, v in headers.items()]
        lines.append("Transfer-Encoding: chunked")
        if not request.keep_alive:
            lines.append("Connection: close")
        self._head: bytes | None = ("\r\n".join(lines) + "\r\n\r\n").encode("latin-1")
        conn.streamed = self

    async def write(self, data: bytes) -> None:
        if not data and self._head is None:
            return
        out = self._take_head() + (b"%x\r\n%b\r\n" % (len(data), data) if data else b"")
        await self._conn.send(out)

    async def write_eof(self, data: bytes = b"") -> None:
        out = self._take_head() + (b"%x\r\n%b\r\n" % (len(data), data) if data else b"") + b"0\r\n\r\n"
        await self._conn.send(out)

    def _take_head(self) -> bytes:
        head, self._head = self._head, None
        return head or b""


Handler = Callable[[FrontRequest], Awaitable[Any]]


class FrontConnection(asyncio.Protocol):
    """One client connection: requests one at a time (a pipelined next request waits in the buffer)."""

    def __init__(self, handler: Handler, max_body: int, tracker: set[FrontConnection], idle_s: float = IDLE_S) -> None:
        self.handler = handler
        self.max_body = max_body
        self.tracker = tracker
        self.idle_s = idle_s
        self._idle: asyncio.TimerHandle | None = None
        self.transport: Any = None
        self.buf = bytearray()
        self.task: asyncio.Task[None] | None = None
        self.closed = False
        self.streamed: FrontStream | None = None
        self._drain: asyncio.Future[None] | None = None
        self._paused = False
        self._continued = False

    # ---- asyncio.Protocol -----------------------------------------------------------------------------
    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = transport
        self.tracker.add(self)
        self._arm_idle()

    def connection_lost(self, exc: Exception | None) -> None:
        self.closed = True
        self.tracker.discard(self)
        if self._idle is not None:
            self._idle.cancel()
        if self.task is not None and not self.task.done():
            self.task.cancel()  # the client went away: its handler stops (and cancels its upstream request)
        self._wake()

    def data_received(self, data: bytes) -> None:
        self.buf += data
        if self.task is None:
            self._arm_idle()
            self._next()

    def _arm_idle(self) -> None:
        """(Re)start the idle clock: between requests, and while a request's bytes are still arriving (so a client
        that never finishes its head or body is closed too)."""
        if self._idle is not None:
            self._idle.cancel()
        self._idle = asyncio.get_running_loop().call_later(self.idle_s, self._idle_out)

    def _idle_out(self) -> None:
        if self.task is None and not self.closed and self.transport is not None:
            self.transport.close()

    def pause_writing(self) -> None:
        self._paused = True

    def resume_writing(self) -> None:
        self._paused = False
        self._wake()

    def _wake(self) -> None:
        fut, self._drain = self._drain, None
        if fut is not None and not fut.done():
            fut.set_result(None)

    # ---- sending --------------------------------------------------------------------------------------
    async def send(self, data: bytes) -> None:
        if self.closed or self.transport is None or self.transport.is_closing():
            raise ConnectionResetError("the client closed the connection")
        self.transport.write(data)
        while self._paused and not self.closed:
            self._drain = asyncio.get_running_loop().create_future()
            await self._drain
        if self.closed:
            raise ConnectionResetError("the client closed the connection")

    def _send_response(self, resp: web.Response, request: FrontRequest | None, keep_alive: bool) -> None:
        raw = resp.body
        full = bytes(raw) if isinstance(raw, bytes | bytearray) else b""  # handlers give bytes bodies only
        body = b"" if request is not None and request.method == "HEAD" else full
        lines = [f"HTTP/1.1 {resp.status} {resp.reason}"]
        lines += [f"{k}: {v}" for k, v in resp.headers.items() if k.lower() not in ("content-length", "connection")]
        lines.append(f"Content-Length: {len(full)}")
        if not keep_alive or resp.headers.get("Connection", "").lower() == "close":
            lines.append("Connection: close")
        if self.transport is not None and not self.transport.is_closing():
            self.transport.write(("\r\n".join(lines) + "\r\n\r\n").encode("latin-1") + body)

    # ---- parsing --------------------------------------------------------------------------------------
    def _next(self) -> None:
        """Start the handler for the next complete request in the buffer, if there is one."""
        if self.closed:
            return
        try:
            parsed = self._parse()
        except BadRequest as exc:
            self._fail(exc.status, str(exc))
            return
        if parsed is not None:
            if self._idle is not None:
                self._idle.cancel()
                self._idle = None
            self.task = asyncio.ensure_future(self._run(parsed))

    def _parse(self) -> FrontRequest | None:
        buf = self.buf
        end = buf.find(b"\r\n\r\n")
        if end < 0:
            if len(buf) > MAX_HEAD:
                raise BadRequest(431, "request head too large")
            return None
        lines = bytes(buf[:end]).decode("latin-1").split("\r\n")
        try:
            method, target, version = lines[0].split(" ")
        except ValueError:
            raise BadRequest(400, "malformed request line") from None
        if not version.startswith("HTTP/1."):
            raise BadRequest(505, "HTTP/1.x only")
        headers: CIMultiDict[str] = CIMultiDict()
        for line in lines[1:]:
            name, sep, value = line.partition(":")
            if not sep or not name or name != name.strip():
                raise BadRequest(400, "malformed header line")
            headers.add(name, value.strip())
        conn_hdr = headers.get("Connection", "").lower()
        keep_alive = "close" not in conn_hdr if version == "HTTP/1.1" else "keep-alive" in conn_hdr
        start = end + 4
        if "chunked" in headers.get("Transfer-Encoding", "").lower():
            got = self._chunked(start)
            if got is None:
                self._continue(headers)
                return None
            body, used = got
        else:
            try:
                length = int(headers.get("Content-Length", "0"))
            except ValueError:
                raise BadRequest(400, "bad Content-Length") from None
            if length < 0:
                raise BadRequest(400, "bad Content-Length")
            if length > self.max_body:
                raise BadRequest(413, f"request body over {self.max_body} bytes")
            if len(buf) - start < length:
                self._continue(headers)
                return None
            body, used = bytes(buf[start:start + length]), start + length
        del buf[:used]
        self._continued = False
        return FrontRequest(self, method, target, version, headers, body, keep_alive)

    def _continue(self, headers: CIMultiDict[str]) -> None:
        if not self._continued and headers.get("Expect", "").lower() == "100-continue":
            self._continued = True
            self.transport.write(b"HTTP/1.1 100 Continue\r\n\r\n")

    def _chunked(self, pos: int) -> tuple[bytes, int] | None:
        buf = self.buf
        parts: list[bytes] = []
        size = 0
        while True:
            eol = buf.find(b"\r\n", pos)
            if eol < 0:
                return None
            try:
                n = int(bytes(buf[pos:eol]).split(b";")[0], 16)
            except ValueError:
                raise BadRequest(400, "bad chunk size") from None
            size += n
            if size > self.max_body:
                raise BadRequest(413, f"request body over {self.max_body} bytes")
            if n == 0:
                trailer_end = buf.find(b"\r\n\r\n", eol)
                if trailer_end == eol:  # no trailers: "0\r\n\r\n"
                    return b"".join(parts), eol + 4
                if trailer_end < 0:
                    return None
                return b"".join(parts), trailer_end + 4
            if len(buf) < eol + 2 + n + 2:
                return None
            parts.append(bytes(buf[eol + 2:eol + 2 + n]))
            pos = eol + 2 + n + 2

    def _fail(self, status: int, message: str) -> None:
        self._send_response(error_response(status, message, "bad_request"), None, False)
        self.transport.close()

    # ---- one exchange ---------------------------------------------------------------------------------
    async def _run(self, request: FrontRequest) -> None:
        self.streamed = None
        keep = request.keep_alive
        try:
            resp = await self.handler(request)
            if self.streamed is None:
                if isinstance(resp, web.Response):
                    self._send_response(resp, request, keep)
                else:  # pragma: no cover - every handler returns a Response or streams
                    raise TypeError(f"handler returned {type(resp).__name__}")
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
                self._send_response(error_response(500, "internal error", "internal_error"), request, False)
        finally:
            self.task = None
        if self.closed:
            return
        if not keep:
            self.transport.close()
            return
        self._arm_idle()
        if self.buf:
            self._next()


@contextlib.asynccontextmanager
async def serve_front(handler: Handler, host: str, port: int, max_body: int, idle_s: float = IDLE_S) -> Any:
    """Listen on host:port; yields the asyncio server. On exit: stop listening, cancel what still runs."""
    loop = asyncio.get_running_loop()
    conns: set[FrontConnection] = set()
    server = await loop.create_server(lambda: FrontConnection(handler, max_body, conns, idle_s), host, port,
                                      backlog=2048)
    try:
        yield server
    finally:
        server.close()
        tasks = [c.task for c in list(conns) if c.task is not None and not c.task.done()]
        for c in list(conns):
            if c.transport is not None:
                c.transport.close()
        for t in tasks:
            t.cancel()
        for t in tasks:
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await t

