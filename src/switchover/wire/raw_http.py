"""A minimal HTTP/1.1 client on non-blocking sockets for plain-http generation requests (the load generator's path).

Why its own sockets: aiohttp's per-request and per-read machinery (StreamReader, flow control, session.post)
dominated the client's CPU per streamed chunk, and an asyncio transport cannot hand over a socket's ancillary data.
Each keep-alive connection here reads with `recvmsg` from a loop reader callback; on Linux the socket has
SO_TIMESTAMPNS, so every read carries the kernel's receive time of its last bytes, and every event those bytes
complete gets that time (converted to the `perf_counter_ns` clock). A chunk's stamp then says when it reached this
machine, not when the event loop got round to it: with 256 busy streams, many sockets are ready in one loop turn
and the last of them are read milliseconds later. Where the kernel gives no stamp (another OS, another
architecture) the read is stamped on arrival in user space, and the pool counts which kind each read got, so a
report can say which it used. One request = one `send` (a partial send waits for the socket to drain).
"""

from __future__ import annotations

import asyncio
import contextlib
import socket
import time
from collections import deque
from typing import TYPE_CHECKING

from switchover.wire import stamps
from switchover.wire.error_body import parse_error_body
from switchover.wire.fold import (
    apply_body,
    apply_events,
    apply_payloads,
    connect_text,
    ended,
    err_text,
    join_streamed_text,
    too_large,
)
from switchover.wire.http1 import HttpProtocolError, LlhttpResponseParser
from switchover.wire.records import Failure, FailureKind, RequestRecord
from switchover.wire.sse import SSEParser
from switchover.wire.stamps import ANC_SPACE, StampCounts, read_time

if TYPE_CHECKING:
    from switchover.wire.client import Timeouts

_MAX_ERROR_BODY = 65536
_NS = 1_000_000_000
_READ = 65536

# ---------------------------------------------------------------------------------------------- connections

_BODY, _STREAM, _ERROR = range(3)


class _Conn:
    """One keep-alive connection on its own non-blocking socket; runs at most one exchange at a time and fills its
    record as bytes arrive."""

    def __init__(self, pool: RawPool, sock: socket.socket) -> None:
        self.pool = pool
        self.sock = sock
        self.fd = sock.fileno()
        self.closed = False
        self.pending: memoryview | None = None  # the unsent rest of a request
        self.rec: RequestRecord | None = None  # the exchange in progress, if any
        self.fut: asyncio.Future[bool] | None = None
        self.parser = LlhttpResponseParser()
        self.sse = SSEParser()
        self.mode = _BODY
        self.stream = False
        self.body: list[bytes] = []
        self.body_len = 0
        self.received = False
        self.last_ns = 0
        self.total_ns = 0
        self.timer: asyncio.TimerHandle | None = None
        pool.loop.add_reader(self.fd, self._readable)

    # -- socket callbacks

    def _readable(self) -> None:
        try:
            data, anc, _flags, _addr = self.sock.recvmsg(_READ, ANC_SPACE)
        except (BlockingIOError, InterruptedError):
            return
        except OSError as exc:
            self._lost(exc)
            return
        if not data:
            self._eof()
            return
        now = read_time(anc, time.perf_counter_ns(), self.last_ns, self.pool.stamps)
        self._data(data, now)

    def _writable(self) -> None:
        rest = self.pending
        if rest is None:
            self.pool.loop.remove_writer(self.fd)
            return
        try:
            n = self.sock.send(rest)
        except (BlockingIOError, InterruptedError):
            return
        except OSError as exc:
            self._lost(exc)
            return
        if n < len(rest):
            self.pending = rest[n:]
        else:
            self.pending = None
            self.pool.loop.remove_writer(self.fd)

    def _send(self, data: bytes) -> None:
        try:
            n = self.sock.send(data)
        except (BlockingIOError, InterruptedError):
            n = 0
        except OSError as exc:  # reported from the loop, as a transport would, not from inside start()
            self.pool.loop.call_soon(self._lost, exc)
            return
        if n < len(data):
            self.pending = memoryview(data)[n:]
            self.pool.loop.add_writer(self.fd, self._writable)

    def _data(self, data: bytes, now: int) -> None:
        rec = self.rec
        if rec is None:  # unsolicited bytes on an idle connection: it is no longer in a known state
            self.abort()
            return
        self.received = True
        self.last_ns = now
        parser = self.parser
        try:
            body = parser.feed(data)
        except HttpProtocolError as exc:
            self._fail(FailureKind.PROTOCOL, f"malformed HTTP response: {exc}", now)
            return
        if rec.headers_ns is None and parser.status is not None:
            self._on_head(rec, now)
            if self.rec is None:
                return
        if body:
            if self.mode == _STREAM:
                if rec.first_byte_ns is None:
                    rec.first_byte_ns = now
                    self._arm(min(now + self.pool.idle_ns, self.total_ns) - time.perf_counter_ns())
                payloads = self.sse.feed_payloads(body)
                if payloads is not None:
                    apply_payloads(rec, payloads, now)
                else:
                    apply_events(rec, self.sse.feed_raw(body), now)
                if self.sse.pending > self.pool.timeouts.max_body:
                    self._too_large(rec, "an unfinished SSE event", now)
                    return
            else:
                self.body.append(body)
                self.body_len += len(body)
                if self.mode == _ERROR and self.body_len >= _MAX_ERROR_BODY:
                    parser.keep_alive = False
                    self._complete(rec, now)
                    return
                if self.body_len > self.pool.timeouts.max_body:
                    self._too_large(rec, "the response body", now)
                    return
        if parser.done:
            self._complete(rec, now)

    def _eof(self) -> None:
        rec = self.rec
        if rec is not None and self.parser.reads_until_close:
            self.parser.eof()
            self._complete(rec, time.perf_counter_ns())
        self.abort()

    def _lost(self, exc: Exception | None) -> None:
        """The connection is gone (closed by us or the peer, or a socket error)."""
        self._close_socket()
        self.pool.forget(self)
        if self.rec is not None:
            now = time.perf_counter_ns()
            if not self.received:  # nothing came back: the caller may resend on a fresh connection
                self._settle(now, stale=True)
            else:
                why = f": {exc}" if exc else ""
                self._fail(FailureKind.DISCONNECTED, f"server closed the connection mid-response{why}", now)

    # -- exchange

    def start(
        self, rec: RequestRecord, request: bytes, stream: bool, fb_ns: int, total_ns: int
    ) -> asyncio.Future[bool]:
        """Send one request; the returned future is True when nothing came back and a resend is safe."""
        self.rec = rec
        self.fut = fut = self.pool.loop.create_future()
        self.parser = LlhttpResponseParser()
        self.stream = stream
        self.mode = _BODY
        self.body = []
        self.body_len = 0
        self.received = False
        self.total_ns = total_ns
        self.last_ns = time.perf_counter_ns()  # the floor for this exchange's read stamps
        self._send(request)
        self._arm(fb_ns - time.perf_counter_ns())
        return fut

    def _on_head(self, rec: RequestRecord, now: int) -> None:
        status = self.parser.status
        rec.headers_ns = now
        rec.status = status
        assert status is not None
        if status >= 300:  # redirects are not followed: an engine that redirects a generation request is misconfigured
            self.mode = _ERROR
            return
        enc = self.parser.headers.get("content-encoding", "identity").lower()
        if enc not in ("identity", ""):
            self._fail(FailureKind.PROTOCOL, f"compressed response ({enc}) was not asked for", now)
            return
        if self.stream:
            self.mode = _STREAM
            self.sse = SSEParser()

    def _complete(self, rec: RequestRecord, now: int) -> None:
        """The response is complete: fold what is left into the record."""
        if self.mode == _STREAM:
            apply_events(rec, self.sse.finish(), now)
            if rec.first_byte_ns is None:
                rec.first_byte_ns = now
            rec.end_ns = now
            join_streamed_text(rec)
            if rec.failure is None and not ended(rec):
                rec.failure = Failure(FailureKind.TRUNCATED, "stream ended without finish_reason or [DONE]", rec.status)
        elif self.mode == _ERROR:
            rec.end_ns = now
            raw = b"".join(self.body)[:_MAX_ERROR_BODY]
            err = parse_error_body(raw)
            status = rec.status or 0
            rec.failure = Failure(FailureKind.HTTP_STATUS, err_text(status, err), rec.status, err)
        else:
            rec.first_byte_ns = rec.end_ns = now
            apply_body(rec, b"".join(self.body))
        self.body = []
        reuse = self.parser.keep_alive and not self.parser.extra and not self.closed
        self._settle(now, stale=False)
        if reuse:
            self.pool.release(self)
        else:
            self.abort()

    def _too_large(self, rec: RequestRecord, what: str, now: int) -> None:
        """Stop reading an answer past the memory limit: Failure PROTOCOL, the connection closed."""
        if self.mode == _STREAM:
            join_streamed_text(rec)  # the text so far is kept, as for any stream that ends in a failure
        else:
            rec.first_byte_ns = rec.first_byte_ns or now
        self.body = []
        rec.end_ns = now
        too_large(rec, what, self.pool.timeouts.max_body)
        self._settle(now, stale=False)
        self.abort()

    def _fail(self, kind: FailureKind, message: str, now: int) -> None:
        rec = self.rec
        if rec is None:
            return
        rec.end_ns = now
        rec.failure = Failure(kind, message, rec.status)
        self._settle(now, stale=False)
        self.abort()

    def _settle(self, now: int, *, stale: bool) -> None:
        self.rec = None
        self.parser.release()  # break llhttp's reference cycle now, not at the next full collection
        if self.timer is not None:
            self.timer.cancel()
            self.timer = None
        fut, self.fut = self.fut, None
        if fut is not None and not fut.done():
            fut.set_result(stale)

    def _arm(self, delay_ns: int) -> None:
        if self.timer is not None:
            self.timer.cancel()
        self.timer = self.pool.loop.call_later(max(delay_ns, 0) / _NS, self._on_timer)

    def _on_timer(self) -> None:
        """First-byte, idle-gap or total deadline; the idle check is lazy (re-armed, not moved per read)."""
        self.timer = None
        rec = self.rec
        if rec is None:
            return
        now = time.perf_counter_ns()
        pool = self.pool
        if rec.first_byte_ns is not None and self.mode == _STREAM:
            due = min(self.last_ns + pool.idle_ns, self.total_ns)
            if now < due:
                self._arm(due - now)
                return
            if now >= self.total_ns - 1_000_000:
                kind, limit = FailureKind.TOTAL_TIMEOUT, pool.timeouts.total
            else:
                kind, limit = FailureKind.IDLE_TIMEOUT, pool.timeouts.idle
        elif now >= self.total_ns - 1_000_000:
            kind, limit = FailureKind.TOTAL_TIMEOUT, pool.timeouts.total
        else:
            kind, limit = FailureKind.FIRST_BYTE_TIMEOUT, pool.timeouts.first_byte
        self._fail(kind, f"{kind.value.replace('_', ' ')} after {limit:g} s", now)

    def abort(self) -> None:
        """Close now; the exchange in progress (if any) is settled from the loop, as after a peer's close."""
        if not self.closed:
            self._close_socket()
            self.pool.loop.call_soon(self._lost, None)

    def _close_socket(self) -> None:
        if self.closed:
            return
        self.closed = True
        loop = self.pool.loop
        with contextlib.suppress(RuntimeError, ValueError, OSError):  # the loop may be closed already
            loop.remove_reader(self.fd)
            if self.pending is not None:
                loop.remove_writer(self.fd)
        self.pending = None
        self.sock.close()


class RawPool:
    """Keep-alive connections to one host:port, at most `limit` open (or opening) at once."""

    def __init__(
        self, host: str, port: int, url: str, limit: int, timeouts: Timeouts, stamps: StampCounts | None = None
    ) -> None:
        self.host = host
        self.port = port
        self.url = url
        self.limit = max(1, limit)
        self.timeouts = timeouts
        self.idle_ns = int(timeouts.idle * _NS)
        self.loop = asyncio.get_running_loop()
        self._idle: list[_Conn] = []
        self._all: set[_Conn] = set()
        self._opening = 0
        self._waiters: deque[asyncio.Future[None]] = deque()
        self.closed = False
        self.stamps = stamps if stamps is not None else StampCounts()

    def release(self, conn: _Conn) -> None:
        if conn.closed:
            return
        self._idle.append(conn)
        self._wake()

    def forget(self, conn: _Conn) -> None:
        if conn in self._all:
            self._all.discard(conn)
            if conn in self._idle:
                self._idle.remove(conn)
            self._wake()

    def _wake(self) -> None:
        while self._waiters:
            w = self._waiters.popleft()
            if not w.done():
                w.set_result(None)
                return

    def _pop_idle(self) -> _Conn | None:
        while self._idle:
            conn = self._idle.pop()
            if not conn.closed:
                return conn
        return None

    async def _slot(self, fresh: bool) -> _Conn | None:
        """An idle connection (unless `fresh`), or None with a slot reserved for a new one (see `_open`)."""
        while True:
            if not fresh:
                conn = self._pop_idle()
                if conn is not None:
                    return conn
            if len(self._all) + self._opening < self.limit:
                self._opening += 1
                return None
            if fresh and self._idle:  # make room for the new connection
                self._idle.pop().abort()
                continue
            w = self.loop.create_future()
            self._waiters.append(w)
            try:
                await w
            except asyncio.CancelledError:
                if w.done() and not w.cancelled():
                    self._wake()  # pass the wake-up on
                raise

    async def _open(self) -> _Conn:
        """Connect in the slot `_slot` reserved."""
        try:
            sock = await self._connect()
        except BaseException:
            self._opening -= 1
            self._wake()  # the slot is free again
            raise
        self._opening -= 1
        if self.closed:
            sock.close()
            raise ConnectionAbortedError("the client was closed")
        conn = _Conn(self, sock)
        self._all.add(conn)
        return conn

    async def _connect(self) -> socket.socket:
        """A connected non-blocking socket: each address of the host in turn, the last error if none answers."""
        infos = await self.loop.getaddrinfo(self.host, self.port, type=socket.SOCK_STREAM, proto=socket.IPPROTO_TCP)
        last: OSError = OSError(f"no address for {self.host}")
        for family, type_, proto, _, addr in infos:
            sock = socket.socket(family, type_, proto)
            try:
                sock.setblocking(False)
                sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
                stamps.enable(sock)
                await self.loop.sock_connect(sock, addr)
                return sock
            except OSError as exc:
                sock.close()
                last = exc
            except BaseException:
                sock.close()
                raise
        raise last

    async def exchange(self, rec: RequestRecord, request: bytes, stream: bool, *, fresh: bool) -> bool:
        """One request/response on a pooled connection; fills `rec`. True: nothing came back, resend is safe.
        Waiting for a free connection counts against the first-byte (and total) limit, connecting also against
        the connect limit, as with aiohttp."""
        t = self.timeouts
        start = time.perf_counter_ns()
        total_ns = start + int(t.total * _NS)
        fb_ns = min(start + int(t.first_byte * _NS), total_ns)
        conn = None if fresh else self._pop_idle()  # the usual case: no coroutine switch, no timeout scope
        try:
            if conn is None:
                connecting: asyncio.Timeout | None = None
                try:
                    async with asyncio.timeout((fb_ns - start) / _NS):
                        conn = await self._slot(fresh)
                        if conn is None:
                            connecting = asyncio.timeout(t.connect)
                            async with connecting:
                                conn = await self._open()
                except TimeoutError:
                    now = rec.end_ns = time.perf_counter_ns()
                    if connecting is not None and connecting.expired():
                        rec.failure = Failure(
                            FailureKind.CONNECT_TIMEOUT, f"connect to {self.url} timed out after {t.connect:g} s"
                        )
                    elif now >= total_ns - 1_000_000:
                        rec.failure = Failure(FailureKind.TOTAL_TIMEOUT, f"total timeout after {t.total:g} s")
                    else:
                        rec.failure = Failure(
                            FailureKind.FIRST_BYTE_TIMEOUT, f"first byte timeout after {t.first_byte:g} s"
                        )
                    return False
                except OSError as exc:
                    rec.end_ns = time.perf_counter_ns()
                    rec.failure = Failure(FailureKind.CONNECT, connect_text(self.url, exc))
                    return False
            fut = conn.start(rec, request, stream, fb_ns, total_ns)
            return await fut
        except asyncio.CancelledError:
            if conn is not None and conn.rec is rec:
                conn._settle(time.perf_counter_ns(), stale=False)
                conn.abort()
            rec.end_ns = time.perf_counter_ns()
            rec.failure = Failure(FailureKind.CANCELLED, "cancelled by the caller", rec.status)
            raise

    def close(self) -> None:
        self.closed = True
        for conn in list(self._all):
            with contextlib.suppress(RuntimeError):  # its event loop may already be closed
                conn.abort()
        self._idle.clear()
        self._all.clear()
