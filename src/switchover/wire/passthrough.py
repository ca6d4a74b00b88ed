"""Pass-through HTTP/1.1 keep-alive client: the gateway's old / new arm requests, bodies relayed as read.

It shares http1.py with `raw_http` (which reads with http1's llhttp-backed parser), and differs from it in what it
does with the body: `raw_http` folds it into a RequestRecord; here it is handed over as read (Content-Length, chunked or
until close), with read-side flow control, to a relay. One write per request (head + body); a keep-alive pool
per (host, port, tls) that drops connections idle for `keepalive_s` (below the 5 s keep-alive of uvicorn and
cpp-httplib). A request that meets a connection the server has just closed (no response byte) is sent once more
on a fresh connection. Bodies are never decoded (no Accept-Encoding is sent).
"""

from __future__ import annotations

import asyncio
import re
import ssl
import time
from collections.abc import Iterable
from dataclasses import dataclass
from urllib.parse import urlsplit

from multidict import CIMultiDict
from yarl import URL

from switchover.wire.http1 import HttpProtocolError, ResponseParser

HIGH_WATER = 256 << 10  # stop reading from the socket while this much body is buffered
_BAD_TARGET = re.compile(r"[\x00-\x20\x7f#]").search
_BAD_FIELD = re.compile(r"[\r\n\x00]").search


@dataclass(frozen=True, slots=True)
class Origin:
    """Where a request goes: host, port, TLS. Built from configuration only, never from a client's request."""

    host: str
    port: int
    tls: bool = False

    @classmethod
    def of(cls, base_url: str) -> Origin:
        """The origin of a configured base URL (its path, if any, is a prefix the caller adds to targets)."""
        parts = urlsplit(base_url)
        tls = parts.scheme == "https"
        if parts.scheme not in ("http", "https") or not parts.hostname or "@" in parts.netloc:
            raise ValueError(f"not an http(s) origin: {base_url!r}")
        return cls(parts.hostname, parts.port or (443 if tls else 80), tls)

    @property
    def host_header(self) -> str:
        host = f"[{self.host}]" if ":" in self.host else self.host
        return host if self.port == (443 if self.tls else 80) else f"{host}:{self.port}"


class UpstreamConnectError(ConnectionError):
    """The connection could not be opened."""


class UpstreamDisconnected(ConnectionError):
    """The connection broke (or the server broke HTTP) before the response was complete."""


class H1Response:
    """The status and headers of a response; its body is read with `readany()` / `read()`. Mirrors the
    parts of aiohttp.ClientResponse the gateway uses (`content.readany()`, `release()`, `close()`)."""

    __slots__ = ("_buf", "_conn", "_eof", "_exc", "_size", "_waiter", "headers", "keep_alive", "status")

    def __init__(self, conn: _Conn, status: int, headers: CIMultiDict[str], keep_alive: bool) -> None:
        self._conn: _Conn | None = conn
        self.status = status
        self.headers = headers
        self.keep_alive = keep_alive
        self._buf: list[bytes] = []
        self._size = 0
        self._eof = False
        self._exc: BaseException | None = None
        self._waiter: asyncio.Future[None] | None = None

    @property
    def content(self) -> H1Response:
        return self

    def _wake(self) -> None:
        w = self._waiter
        if w is not None and not w.done():
            w.set_result(None)

    def _feed(self, data: bytes) -> None:
        self._buf.append(data)
        self._size += len(data)
        if self._size > HIGH_WATER and self._conn is not None:
            self._conn.pause()
        self._wake()

    def _end(self, exc: BaseException | None = None) -> None:
        if exc is None:
            self._eof = True
        elif not self._eof:
            self._exc = exc
        self._wake()

    def at_eof(self) -> bool:
        """The whole body has been read: the next readany() returns b"" at once."""
        return self._eof and not self._buf

    async def readany(self) -> bytes:
        """What has arrived (waiting for something), or b"" at the end of the body."""
        while not self._buf:
            if self._eof:
                return b""
            if self._exc is not None:
                raise self._exc
            self._waiter = asyncio.get_running_loop().create_future()
            try:
                await self._waiter
            finally:
                self._waiter = None
        data = self._buf[0] if len(self._buf) == 1 else b"".join(self._buf)
        self._buf.clear()
        self._size = 0
        if self._conn is not None:
            self._conn.resume()
        return data

    async def read(self) -> bytes:
        parts = []
        while chunk := await self.readany():
            parts.append(chunk)
        return b"".join(parts)

    def release(self) -> None:
        """Done with it: a fully read keep-alive response returns its connection to the pool."""
        conn, self._conn = self._conn, None
        if conn is not None:
            if self._eof and not self._buf and self.keep_alive:
                conn.idle()
            else:
                conn.close()

    def close(self) -> None:
        """Abandon the response: its connection is closed (the server sees the client go away)."""
        conn, self._conn = self._conn, None
        if conn is not None:
            conn.close()


class _Conn(asyncio.Protocol):
    """One connection: parses the response to the request in flight and feeds its body to an H1Response."""

    def __init__(self, pool: H1Pool, key: tuple[str, int, bool]) -> None:
        self.pool, self.key = pool, key
        self.transport: asyncio.Transport | None = None
        self.closed = False
        self.paused = False
        self.used = 0.0  # time.monotonic() when last returned to the pool
        self._head: asyncio.Future[H1Response] | None = None
        self._resp: H1Response | None = None
        self._parser = ResponseParser()
        self._got_bytes = False

    # ---- asyncio.Protocol ---------------------------------------------------------------------------
    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = transport  # type: ignore[assignment]  # uvloop's is not an asyncio.Transport subclass

    def connection_lost(self, exc: Exception | None) -> None:
        self.closed = True
        head, resp = self._head, self._resp
        if head is not None and not head.done():
            err = UpstreamDisconnected("connection closed before the response head")
            err.got_bytes = self._got_bytes  # type: ignore[attr-defined]
            head.set_exception(err)
        if resp is not None:
            self._resp = None
            if self._parser.reads_until_close:
                self._parser.eof()
                resp._end()
            else:
                resp._end(UpstreamDisconnected("connection closed mid-body"))

    def data_received(self, data: bytes) -> None:
        self._got_bytes = True
        resp = self._resp
        try:
            if resp is None and (self._head is None or self._head.done()):
                raise HttpProtocolError("bytes from the server with no request in flight")
            parser = self._parser
            body = parser.feed(data)
            if resp is None:
                if parser.status is None:  # the head is not all here yet
                    return
                resp = self._resp = H1Response(self, parser.status, CIMultiDict(parser.headers), parser.keep_alive)
                assert self._head is not None
                self._head.set_result(resp)
            if parser.extra:
                raise HttpProtocolError("bytes after the end of the response")
            if body:
                resp._feed(body)
            if parser.done:
                self._resp = None
                resp._end()
        except HttpProtocolError as exc:
            err = UpstreamDisconnected(f"bad HTTP from the server: {exc}")
            if self._head is not None and not self._head.done():
                self._head.set_exception(err)
            if self._resp is not None:
                self._resp._end(err)
                self._resp = None
            self.close()

    # ---- request / response -------------------------------------------------------------------------
    async def send(self, data: bytes, method: str) -> H1Response:
        assert self.transport is not None
        self._parser = ResponseParser(no_body=method == "HEAD")
        self._got_bytes = False
        self._head = asyncio.get_running_loop().create_future()
        self.transport.write(data)
        try:
            return await self._head
        finally:
            self._head = None

    # ---- pool bookkeeping ---------------------------------------------------------------------------
    def pause(self) -> None:
        if not self.paused and self.transport is not None and not self.closed:
            self.paused = True
            self.transport.pause_reading()

    def resume(self) -> None:
        if self.paused and self.transport is not None and not self.closed:
            self.paused = False
            self.transport.resume_reading()

    def idle(self) -> None:
        self.resume()
        if self.closed:
            return
        self.used = time.monotonic()
        self.pool.park(self)

    def close(self) -> None:
        self.closed = True
        if self.transport is not None:
            self.transport.close()


class H1Pool:
    """Keep-alive connections per (host, port, tls); the most recently used idle one is reused first. Each time a
    connection goes idle, those idle past `keepalive_s` or closed by the server are dropped, and at most
    `max_idle` per origin are kept, so a burst's connections do not hold file descriptors until they are taken."""

    def __init__(self, keepalive_s: float = 4.0, max_idle: int = 256) -> None:
        self.keepalive_s = keepalive_s
        self.max_idle = max_idle
        self._idle: dict[tuple[str, int, bool], list[_Conn]] = {}
        self._ssl: ssl.SSLContext | None = None

    def park(self, conn: _Conn) -> None:
        """Keep `conn` for reuse and drop what should not be kept (the list is in the order conns went idle)."""
        idle = self._idle.setdefault(conn.key, [])
        idle.append(conn)
        horizon = time.monotonic() - self.keepalive_s
        stale = 0
        while stale < len(idle) and (idle[stale].closed or idle[stale].used <= horizon):
            stale += 1
        stale = max(stale, len(idle) - self.max_idle)
        for old in idle[:stale]:
            old.close()
        del idle[:stale]
        if any(c.closed for c in idle):
            idle[:] = [c for c in idle if not c.closed]

    def idle_count(self) -> int:
        """Idle connections held now (all origins)."""
        return sum(len(conns) for conns in self._idle.values())

    def _take(self, key: tuple[str, int, bool]) -> _Conn | None:
        idle = self._idle.get(key)
        horizon = time.monotonic() - self.keepalive_s
        while idle:
            conn = idle.pop()
            if not conn.closed and conn.used > horizon:
                return conn
            conn.close()
        return None

    async def _connect(self, key: tuple[str, int, bool], timeout_s: float) -> _Conn:
        host, port, tls = key
        if tls and self._ssl is None:
            self._ssl = ssl.create_default_context()
        loop = asyncio.get_running_loop()
        try:
            async with asyncio.timeout(timeout_s):
                _, conn = await loop.create_connection(
                    lambda: _Conn(self, key), host, port, ssl=self._ssl if tls else None
                )
        except OSError as exc:
            raise UpstreamConnectError(f"{type(exc).__name__}: {exc}") from None
        return conn

    async def request(
        self, method: str, url: URL, headers: Iterable[tuple[str, str]], body: bytes | None, connect_timeout_s: float
    ) -> H1Response:
        """`send` to a parsed URL (its host, port and scheme pick the connection, its path and query the target)."""
        origin = Origin(url.raw_host or "", url.port or (443 if url.scheme == "https" else 80), url.scheme == "https")
        return await self.send(method, origin, url.raw_path_qs, headers, body, connect_timeout_s)

    async def send(
        self,
        method: str,
        origin: Origin,
        target: str,
        headers: Iterable[tuple[str, str]],
        body: bytes | None,
        connect_timeout_s: float,
    ) -> H1Response:
        """Send the request to `origin` and wait for the response head. Where it goes is `origin` alone: `target`
        is only the request line's path. A connection lost before any response byte is retried once on a fresh
        connection (the server closed an idle keep-alive connection meanwhile). Raises ValueError for a target or
        header that would break the request's framing (CR, LF, NUL, a space in the target)."""
        key = (origin.host, origin.port, origin.tls)
        if not target.startswith("/") or _BAD_TARGET(target):
            raise ValueError(f"refusing to send the request target {target[:80]!r}")
        lines = [f"{method} {target} HTTP/1.1", f"Host: {origin.host_header}"]
        has_type = False
        for name, value in headers:
            if _BAD_FIELD(name) or _BAD_FIELD(value):
                raise ValueError(f"refusing to send header {name[:40]!r}: CR, LF or NUL in it")
            lines.append(f"{name}: {value}")
            has_type = has_type or name.lower() == "content-type"
        if body is not None:
            if not has_type:
                lines.append("Content-Type: application/octet-stream")
            lines.append(f"Content-Length: {len(body)}")
        data = ("\r\n".join(lines) + "\r\n\r\n").encode("latin-1", "replace") + (body or b"")
        for attempt in (0, 1):
            conn = self._take(key) or await self._connect(key, connect_timeout_s)
            try:
                return await conn.send(data, method)
            except UpstreamDisconnected as exc:
                conn.close()
                if attempt or getattr(exc, "got_bytes", True):
                    raise
            except BaseException:
                conn.close()
                raise
        raise AssertionError("unreachable")

    def close(self) -> None:
        for conns in self._idle.values():
            for conn in conns:
                conn.close()
        self._idle.clear()
