"""A small HTTP/1.1 keep-alive client for the gateway's hot path (old / new arm requests).

aiohttp's client costs more CPU per request than everything else the gateway does together; this one does
only what a relay needs: one write per request (head + body), the response head parsed once, the body
handed over as read (Content-Length, chunked, or until close), read-side flow control, and a keep-alive pool
that drops connections idle for `keepalive_s` (below the 5 s keep-alive of uvicorn and cpp-httplib). A
request that meets a connection the server has just closed (no response byte) is sent once more on a fresh
connection. Bodies are never decoded (no Accept-Encoding is sent). The shadow keeps using aiohttp.
"""

from __future__ import annotations

import asyncio
import ssl
import time
from collections.abc import Iterable

from multidict import CIMultiDict
from yarl import URL

MAX_HEAD = 64 << 10  # a response head larger than this is a protocol error
HIGH_WATER = 256 << 10  # stop reading from the socket while this much body is buffered


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
        self._buf = bytearray()
        self._got_bytes = False
        self._method = "GET"
        self._left: int | None = None  # body bytes still due (Content-Length) or the current chunk's
        self._mode = ""  # "length" | "chunked" | "close" while a body is being read

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
            resp._end(None if self._mode == "close" else UpstreamDisconnected("connection closed mid-body"))
            self._resp = None

    def data_received(self, data: bytes) -> None:
        self._got_bytes = True
        try:
            if self._resp is None:
                if self._head is None or self._head.done():
                    raise ValueError("bytes from the server with no request in flight")
                self._buf += data
                if not self._parse_head():
                    return
                data, self._buf = bytes(self._buf), bytearray()
                if not data:
                    return
            self._body(data)
        except ValueError as exc:
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
        self._method = method
        self._got_bytes = False
        self._head = asyncio.get_running_loop().create_future()
        self.transport.write(data)
        try:
            return await self._head
        finally:
            self._head = None

    def _parse_head(self) -> bool:
        """Parse a complete head in the buffer (skipping 1xx); True when the response has started."""
        while True:
            end = self._buf.find(b"\r\n\r\n")
            if end < 0:
                if len(self._buf) > MAX_HEAD:
                    raise ValueError("response head too large")
                return False
            lines = bytes(self._buf[:end]).decode("latin-1").split("\r\n")
            del self._buf[:end + 4]
            version, _, rest = lines[0].partition(" ")
            if not version.startswith("HTTP/1.") or not rest[:3].isdigit():
                raise ValueError(f"bad status line {lines[0][:80]!r}")
            status = int(rest[:3])
            if 100 <= status < 200 and status != 101:
                continue  # 100 Continue and other interim responses
            headers: CIMultiDict[str] = CIMultiDict()
            for line in lines[1:]:
                name, sep, value = line.partition(":")
                if not sep:
                    raise ValueError("bad header line")
                headers.add(name.strip(), value.strip())
            break
        conn_hdr = headers.get("Connection", "").lower()
        keep_alive = version == "HTTP/1.1" and "close" not in conn_hdr
        if self._method == "HEAD" or status in (204, 304):
            self._mode, self._left = "length", 0
        elif "chunked" in headers.get("Transfer-Encoding", "").lower():
            self._mode, self._left = "chunked", None
        elif (length := headers.get("Content-Length")) is not None:
            if not length.strip().isdigit():
                raise ValueError("bad Content-Length")
            self._mode, self._left = "length", int(length)
        else:
            self._mode, self._left, keep_alive = "close", None, False
        resp = self._resp = H1Response(self, status, headers, keep_alive)
        assert self._head is not None
        self._head.set_result(resp)
        if self._left == 0:
            self._done()
        return True

    def _body(self, data: bytes) -> None:
        resp = self._resp
        if resp is None:
            raise ValueError("bytes after the end of the response")
        if self._mode == "close":
            resp._feed(data)
        elif self._mode == "length":
            left = self._left or 0
            if len(data) > left:
                raise ValueError("more bytes than Content-Length")
            self._left = left - len(data)
            resp._feed(data)
            if not self._left:
                self._done()
        else:
            self._buf += data
            self._chunks(resp)

    def _chunks(self, resp: H1Response) -> None:
        buf = self._buf
        out: list[bytes] = []
        while True:
            if self._left is None:  # a chunk-size line
                i = buf.find(b"\r\n")
                if i < 0:
                    if len(buf) > 4096:
                        raise ValueError("chunk size line too long")
                    break
                size = int(bytes(buf[:i]).split(b";", 1)[0].strip() or b"x", 16)
                del buf[:i + 2]
                self._left = size if size else -1
            elif self._left == -1:  # trailer lines, then the blank line that ends the body
                i = buf.find(b"\r\n")
                if i < 0:
                    break
                del buf[:i + 2]
                if i == 0:
                    if buf:
                        raise ValueError("bytes after the end of the response")
                    if out:
                        resp._feed(b"".join(out))
                    self._done()
                    return
            elif self._left == 0:  # the CRLF after a chunk's data
                if len(buf) < 2:
                    break
                if buf[:2] != b"\r\n":
                    raise ValueError("chunk not followed by CRLF")
                del buf[:2]
                self._left = None
            else:
                take = min(self._left, len(buf))
                if not take:
                    break
                out.append(bytes(buf[:take]))
                del buf[:take]
                self._left -= take
        if out:
            resp._feed(out[0] if len(out) == 1 else b"".join(out))

    def _done(self) -> None:
        resp, self._resp, self._mode = self._resp, None, ""
        if resp is not None:
            resp._end()

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
        self.pool._idle.setdefault(self.key, []).append(self)

    def close(self) -> None:
        self.closed = True
        if self.transport is not None:
            self.transport.close()


class H1Pool:
    """Keep-alive connections per (host, port, tls); the most recently used idle one is reused first."""

    def __init__(self, keepalive_s: float = 4.0) -> None:
        self.keepalive_s = keepalive_s
        self._idle: dict[tuple[str, int, bool], list[_Conn]] = {}
        self._ssl: ssl.SSLContext | None = None

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
                _, conn = await loop.create_connection(lambda: _Conn(self, key), host, port,
                                                       ssl=self._ssl if tls else None)
        except OSError as exc:
            raise UpstreamConnectError(f"{type(exc).__name__}: {exc}") from None
        return conn

    async def request(self, method: str, url: URL, headers: Iterable[tuple[str, str]], body: bytes | None,
                      connect_timeout_s: float) -> H1Response:
        """Send the request and wait for the response head. A connection lost before any response byte is
        retried once on a fresh connection (the server closed an idle keep-alive connection meanwhile)."""
        host, port = url.raw_host or "", url.port or (443 if url.scheme == "https" else 80)
        key = (host, port, url.scheme == "https")
        host_hdr = f"[{host}]" if ":" in host else host
        if port != (443 if key[2] else 80):
            host_hdr = f"{host_hdr}:{port}"
        lines = [f"{method} {url.raw_path_qs} HTTP/1.1", f"Host: {host_hdr}"]
        has_type = False
        for name, value in headers:
            lines.append(f"{name}: {value}")
            has_type = has_type or name.lower() == "content-type"
        if body is not None:
            if not has_type:
                lines.append("Content-Type: application/octet-stream")
            lines.append(f"Content-Length: {len(body)}")
        data = ("\r\n".join(lines) + "\r\n\r\n").encode("utf-8", "surrogateescape") + (body or b"")
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
