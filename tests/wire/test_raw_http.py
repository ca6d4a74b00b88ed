"""raw_http's response parser under any split of the bytes, and its connection pool against odd servers."""

from __future__ import annotations

import asyncio
import contextlib
import fcntl
import os
import socket
import stat
import struct
import termios
import threading
import time
from collections.abc import AsyncIterator, Callable
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from switchover.errors import BadInput
from switchover.testing import await_until, chunk, usage_chunk
from switchover.wire import EngineClient, FailureKind, Timeouts, stamps
from switchover.wire.http1 import HttpProtocolError, LlhttpResponseParser, ResponseParser


def _splits(data: bytes, cuts: list[int]) -> list[bytes]:
    points = sorted({c % (len(data) + 1) for c in cuts})
    return [data[a:b] for a, b in zip([0, *points], [*points, len(data)], strict=True)]


PARSERS = pytest.mark.parametrize("make", [ResponseParser, LlhttpResponseParser], ids=["python", "llhttp"])


def _parse(pieces: list[bytes], *, close: bool = False, make: Any = ResponseParser) -> tuple[Any, bytes]:
    p = make()
    body = b"".join(p.feed(piece) for piece in pieces)
    if close:
        p.eof()
    return p, body


def _chunked(
    body: bytes, sizes: list[int], ext: list[bytes], trailers: list[tuple[bytes, bytes]], upper: bool
) -> bytes:
    out, pos, i = [], 0, 0
    while pos < len(body):
        n = max(1, sizes[i % len(sizes)] if sizes else len(body))
        piece = body[pos : pos + n]
        size = f"{len(piece):X}" if upper else f"{len(piece):x}"
        out.append(size.encode() + (ext[i % len(ext)] if ext else b"") + b"\r\n" + piece + b"\r\n")
        pos += n
        i += 1
    out.append(b"0" + (ext[0] if ext else b"") + b"\r\n")
    out.extend(name + b": " + value + b"\r\n" for name, value in trailers)
    out.append(b"\r\n")
    return b"".join(out)


bodies = st.binary(max_size=600)
cuts = st.lists(st.integers(min_value=0, max_value=5000), max_size=40)
extensions = st.lists(st.sampled_from([b";a=1", b"; name", b';q="x;y"', b" ;ext", b""]), max_size=3)
trailer_lists = st.lists(
    st.tuples(st.sampled_from([b"X-Trailer", b"Expires"]), st.sampled_from([b"1", b"soon"])), max_size=2
)


@PARSERS
@settings(max_examples=300, deadline=None)
@given(body=bodies, cuts=cuts)
def test_content_length_body_is_the_same_under_any_split(body: bytes, cuts: list[int], make: Any) -> None:
    raw = b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n" % len(body) + body
    p, got = _parse(_splits(raw, cuts), make=make)
    assert got == body and p.done and p.status == 200 and p.keep_alive and not p.extra


@PARSERS
@settings(max_examples=400, deadline=None)
@given(
    body=bodies,
    sizes=st.lists(st.integers(1, 80), max_size=6),
    ext=extensions,
    trailers=trailer_lists,
    upper=st.booleans(),
    cuts=cuts,
)
def test_chunked_body_is_the_same_under_any_split(
    body: bytes,
    sizes: list[int],
    ext: list[bytes],
    trailers: list[tuple[bytes, bytes]],
    upper: bool,
    cuts: list[int],
    make: Any,
) -> None:
    raw = b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n" + _chunked(body, sizes, ext, trailers, upper)
    p, got = _parse(_splits(raw, cuts), make=make)
    assert got == body and p.done and p.keep_alive and not p.extra


@PARSERS
@settings(max_examples=200, deadline=None)
@given(body=bodies, cuts=cuts)
def test_body_read_until_close_is_the_same_under_any_split(body: bytes, cuts: list[int], make: Any) -> None:
    raw = b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\n\r\n" + body
    p, got = _parse(_splits(raw, cuts), close=True, make=make)
    assert got == body and p.done and not p.keep_alive


@PARSERS
def test_chunk_size_line_split_byte_by_byte(make: Any) -> None:
    raw = b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n1a;ext=1\r\n" + b"x" * 26 + b"\r\n0\r\nT: 1\r\n\r\n"
    p, got = _parse([raw[i : i + 1] for i in range(len(raw))], make=make)
    assert got == b"x" * 26 and p.done


@PARSERS
def test_interim_responses_are_skipped_and_headers_read(make: Any) -> None:
    raw = (
        b"HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 200 OK\r\nconnection: Close\r\nX-A: 1\r\nx-a: 2\r\n"
        b"Content-Length: 2\r\n\r\nok"
    )
    p, got = _parse([raw], make=make)
    assert got == b"ok" and p.status == 200 and not p.keep_alive and p.headers["x-a"] == "1, 2"


@PARSERS
def test_http10_closes_unless_keep_alive(make: Any) -> None:
    p, _ = _parse([b"HTTP/1.0 200 OK\r\nContent-Length: 0\r\n\r\n"], make=make)
    assert p.done and not p.keep_alive


def test_answer_to_head_has_no_body_whatever_its_length() -> None:
    p = ResponseParser(no_body=True)
    assert p.feed(b"HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\n") == b""
    assert p.done and p.keep_alive and not p.extra and p.headers["content-length"] == "5"


@PARSERS
def test_bytes_after_the_response_mark_the_connection_unusable(make: Any) -> None:
    p, got = _parse([b"HTTP/1.1 200 OK\r\nContent-Length: 1\r\n\r\nab"], make=make)
    assert got == b"a" and p.done and p.extra


@PARSERS
@pytest.mark.parametrize(
    "raw",
    [
        b"HTTP/1.1 200 OK\r\nContent-Length: 2, 2\r\n\r\nab",  # RFC 9112 6.3: identical values may be read as one
        b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\nContent-Length: 2\r\n\r\nab",
        b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n2 ;x=1\r\nab\r\n0\r\n\r\n",  # BWS before ';'
    ],
)
def test_responses_rfc_9112_allows_and_llhttp_refuses_are_read_through_the_replay(raw: bytes, make: Any) -> None:
    p, got = _parse([raw[:20], raw[20:]], make=make)
    assert got == b"ab" and p.done and p.status == 200
    if make is LlhttpResponseParser:
        assert p._fallback is not None  # why the replay into ResponseParser stays


@PARSERS
@pytest.mark.parametrize(
    "raw",
    [
        b"HTTX/1.1 200 OK\r\n\r\n",
        b"HTTP/1.1 2000 OK\r\n\r\n",
        b"HTTP/1.1 200 OK\r\nno colon here\r\n\r\n",
        b"HTTP/1.1 200 OK\r\nContent-Length: ten\r\n\r\n",
        b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n",
        b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n2\r\nabX\r\n",
    ],
)
def test_malformed_responses_raise(raw: bytes, make: Any) -> None:
    with pytest.raises(HttpProtocolError):
        _parse([raw], make=make)


# ---------------------------------------------------------------------------------------------- live sockets


class _Scripted:
    """A raw TCP server answering each request with the next scripted reply (bytes, or None to close)."""

    def __init__(self, replies: list[bytes | None], close_after_each: bool = False) -> None:
        self.replies = replies
        self.close_after_each = close_after_each
        self.requests: list[bytes] = []
        self.connections = 0
        self.closed = 0  # connections this server has closed
        self.server: asyncio.Server | None = None
        self.url = ""

    async def _handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.connections += 1
        try:
            while True:
                head = await reader.readuntil(b"\r\n\r\n")
                length = int(head.lower().split(b"content-length: ")[1].split(b"\r\n")[0])
                self.requests.append(head + await reader.readexactly(length))
                reply = self.replies.pop(0) if self.replies else None
                if reply is None:
                    break
                writer.write(reply)
                await writer.drain()
                if self.close_after_each:
                    break
        except (asyncio.IncompleteReadError, ConnectionError):
            pass
        writer.close()
        self.closed += 1

    async def start(self) -> _Scripted:
        self.server = await asyncio.start_server(self._handle, "127.0.0.1", 0)
        self.url = f"http://127.0.0.1:{self.server.sockets[0].getsockname()[1]}"
        return self

    async def stop(self) -> None:
        if self.server is not None:
            self.server.close()


def _sse_reply(keep_alive: bool = True) -> bytes:
    events = [chunk("a"), chunk("b", "stop"), usage_chunk(1, 2), b"data: [DONE]\n\n"]
    body = b"".join(b"%x\r\n%s\r\n" % (len(e), e) for e in events) + b"0\r\n\r\n"
    conn = b"keep-alive" if keep_alive else b"close"
    return (
        b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nTransfer-Encoding: chunked\r\nConnection: "
        + conn
        + b"\r\n\r\n"
        + body
    )


@pytest.fixture
async def scripted() -> AsyncIterator[list[_Scripted]]:
    made: list[_Scripted] = []
    yield made
    for s in made:
        await s.stop()


async def test_keep_alive_connection_is_reused(scripted: list[_Scripted]) -> None:
    srv = await _Scripted([_sse_reply(), _sse_reply(), _sse_reply()]).start()
    scripted.append(srv)
    async with EngineClient(srv.url, transport="raw") as c:
        recs = [await c.complete("p", model="m", stream=True) for _ in range(3)]
    assert all(r.ok and r.text == "ab" and r.reconnects == 0 for r in recs), [r.failure for r in recs]
    assert srv.connections == 1
    assert srv.requests[0].startswith(b"POST /v1/completions HTTP/1.1\r\n")


async def test_finished_exchanges_leave_no_parser_alive_for_the_garbage_collector(scripted: list[_Scripted]) -> None:
    import gc

    srv = await _Scripted([_sse_reply() for _ in range(40)]).start()
    scripted.append(srv)
    gc.collect()
    gc.disable()  # llhttp's parser holds its callbacks: only breaking that cycle frees a finished exchange's parser
    try:
        async with EngineClient(srv.url, transport="raw") as c:
            recs = [await c.complete("p", model="m", stream=True) for _ in range(40)]
            alive = [o for o in gc.get_objects() if type(o) is LlhttpResponseParser and o._p is not None]
    finally:
        gc.enable()
    assert all(r.ok for r in recs) and len(alive) <= 1  # at most the idle connection's, never one per request


async def test_server_closing_after_each_stream_is_handled_like_llama_server(scripted: list[_Scripted]) -> None:
    srv = await _Scripted([_sse_reply()] * 4, close_after_each=True).start()
    scripted.append(srv)
    async with EngineClient(srv.url, transport="raw") as c:
        recs = []
        for i in range(4):
            recs.append(await c.complete("p", model="m", stream=True))
            # the close is noticed while idle, so no resend is needed: wait for the pool to drop the connection
            await await_until(
                lambda i=i: srv.closed > i and c._pool is not None and not c._pool._all,
                5,
                "the pool dropping the connection the server closed",
            )
    assert all(r.ok and r.text == "ab" for r in recs), [r.failure for r in recs]
    assert srv.connections == 4 and sum(r.reconnects for r in recs) == 0


async def test_stale_pooled_connection_is_resent_once_and_counted(scripted: list[_Scripted]) -> None:
    srv = await _Scripted([_sse_reply(), None, _sse_reply()]).start()  # second request: closed with no answer
    scripted.append(srv)
    async with EngineClient(srv.url, transport="raw") as c:
        first = await c.complete("p", model="m", stream=True)
        second = await c.complete("p", model="m", stream=True)
    assert first.ok and second.ok, second.failure
    assert second.reconnects == 1 and srv.connections == 2


async def test_connection_closed_twice_without_answer_is_disconnected(scripted: list[_Scripted]) -> None:
    srv = await _Scripted([None, None]).start()
    scripted.append(srv)
    async with EngineClient(srv.url, transport="raw") as c:
        rec = await c.complete("p", model="m", stream=True)
    assert rec.failure is not None and rec.failure.kind == FailureKind.DISCONNECTED and rec.reconnects == 1


async def test_garbage_response_is_a_protocol_failure(scripted: list[_Scripted]) -> None:
    srv = await _Scripted([b"SSH-2.0-OpenSSH\r\n\r\n"]).start()
    scripted.append(srv)
    async with EngineClient(srv.url, transport="raw") as c:
        rec = await c.complete("p", model="m", stream=True)
    assert rec.failure is not None and rec.failure.kind == FailureKind.PROTOCOL


async def test_connection_close_response_is_not_reused(scripted: list[_Scripted]) -> None:
    srv = await _Scripted([_sse_reply(keep_alive=False), _sse_reply()]).start()
    scripted.append(srv)
    async with EngineClient(srv.url, transport="raw") as c:
        a = await c.complete("p", model="m", stream=True)
        b = await c.complete("p", model="m", stream=True)
    assert a.ok and b.ok and a.reconnects == b.reconnects == 0 and srv.connections == 2


async def test_cancelled_request_closes_its_connection_and_is_recorded(scripted: list[_Scripted]) -> None:
    srv = await _Scripted([b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n"]).start()  # never finishes
    scripted.append(srv)
    async with EngineClient(srv.url, transport="raw", timeouts=Timeouts(idle=5, first_byte=5)) as c:
        task = asyncio.create_task(c.complete("p", model="m", stream=True))
        await await_until(lambda: srv.requests, 5, "the request at the server")
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        await await_until(lambda: c._pool is not None and not c._pool._all, 5, "the cancelled connection gone")


async def test_pool_never_opens_more_than_max_connections(scripted: list[_Scripted]) -> None:
    srv = await _Scripted([_sse_reply()] * 20).start()
    scripted.append(srv)
    async with EngineClient(srv.url, transport="raw", max_connections=3) as c:
        recs = await asyncio.gather(*(c.complete("p", model="m", stream=True) for _ in range(20)))
    assert all(r.ok for r in recs)
    assert srv.connections <= 3


def test_auto_uses_raw_for_http_and_aiohttp_for_https() -> None:
    assert EngineClient("http://127.0.0.1:1").transport == "raw"
    assert EngineClient("https://example.invalid").transport == "aiohttp"
    assert EngineClient("http://127.0.0.1:1", transport="aiohttp").transport == "aiohttp"


@pytest.mark.parametrize(
    ("reply", "kind"),
    [
        (b"HTTP/1.1 200 OK\r\nContent-Encoding: gzip\r\nContent-Length: 2\r\n\r\n\x1f\x8b", FailureKind.PROTOCOL),
        (b"HTTP/1.1 307 Temporary Redirect\r\nLocation: /v2\r\nContent-Length: 0\r\n\r\n", FailureKind.HTTP_STATUS),
        (
            b'HTTP/1.1 503 Service Unavailable\r\nContent-Length: 42\r\n\r\n{"error":{"message":"loading","code":503}}',
            FailureKind.HTTP_STATUS,
        ),
    ],
)
async def test_unusable_answers_fail_with_their_kind(
    scripted: list[_Scripted], reply: bytes, kind: FailureKind
) -> None:
    srv = await _Scripted([reply]).start()
    scripted.append(srv)
    async with EngineClient(srv.url, transport="raw") as c:
        rec = await c.complete("p", model="m")
    assert rec.failure is not None and rec.failure.kind == kind, rec.failure


async def test_non_streamed_body_without_length_is_read_until_close(scripted: list[_Scripted]) -> None:
    body = b'{"id":"x","model":"m","choices":[{"index":0,"text":"hi","finish_reason":"stop"}]}'
    srv = await _Scripted(
        [b"HTTP/1.1 200 OK\nContent-Type: application/json\n\n" + body], close_after_each=True
    ).start()
    scripted.append(srv)
    async with EngineClient(srv.url, transport="raw") as c:
        rec = await c.complete("p", model="m")
    assert rec.ok and rec.text == "hi" and rec.finish_reason == "stop", rec.failure


def test_key_that_cannot_be_a_header_is_bad_input_without_echoing_it(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SO_ODD_KEY", "sk-\u2603-planted")
    with pytest.raises(BadInput) as err:
        EngineClient("http://127.0.0.1:1", api_key_env="SO_ODD_KEY")
    assert "planted" not in str(err.value) and err.value.__cause__ is None


# ---------------------------------------------------------------------------------------------- chunk timestamps


def _threaded_sse_server(gap_s: float, sent: list[int]) -> tuple[socket.socket, threading.Thread]:
    """One connection, one streamed answer: an event, `gap_s` later a second one; `sent` gets each send time."""
    lsock = socket.create_server(("127.0.0.1", 0))

    def serve() -> None:
        conn, _ = lsock.accept()
        with conn:
            conn.recv(65536)
            conn.sendall(
                b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nTransfer-Encoding: chunked\r\n"
                b"Connection: close\r\n\r\n"
            )
            for ev in (chunk("a"), chunk("b", "stop") + b"data: [DONE]\n\n"):
                time.sleep(gap_s)  # the scenario: the server's pause between events (its own thread)
                frame = b"%x\r\n%s\r\n" % (len(ev), ev)
                sent.append(time.perf_counter_ns())
                conn.sendall(frame)
            conn.sendall(b"0\r\n\r\n")

    th = threading.Thread(target=serve, daemon=True)
    th.start()
    return lsock, th


async def _stream_while_the_loop_is_blocked(gap_s: float, block_s: float) -> tuple[Any, list[int], int, str | None]:
    """Events at gap, 2*gap; the event loop blocked from 20 ms to 20 ms + block_s."""
    sent: list[int] = []
    lsock, th = _threaded_sse_server(gap_s, sent)
    port = lsock.getsockname()[1]
    unblocked: list[int] = []

    def hog() -> None:
        time.sleep(block_s)  # the scenario: the event loop blocked (a busy client)
        unblocked.append(time.perf_counter_ns())

    try:
        async with EngineClient(f"http://127.0.0.1:{port}", transport="raw") as c:
            asyncio.get_running_loop().call_later(0.02, hog)
            rec = await c.complete("p", model="m", stream=True)
            stamps = c.chunk_stamps()
    finally:
        th.join(5)
        lsock.close()
    assert rec.ok and rec.text == "ab", rec.failure
    assert len(sent) == 2 and len(rec.chunk_ns) == 2
    return rec, sent, unblocked[0], stamps


kernel_only = pytest.mark.skipif(stamps.SO_TIMESTAMPNS is None, reason="no kernel receive timestamps here")


HOLD_S = 0.1  # how long the blocked loop leaves the first event unread once it is in the client's socket
STAMP_SLACK_NS = 20_000_000  # a kernel stamp converted to perf_counter: within the clock-offset bracket's error


def _client_end(addr: Any) -> socket.socket | None:
    """A duplicate of this process's socket bound to `addr` (the client's end of a loopback connection), to ask the
    kernel how many bytes wait in it unread; None if none is found."""
    for name in os.listdir("/proc/self/fd"):
        with contextlib.suppress(OSError, ValueError):
            fd = int(name)
            if not stat.S_ISSOCK(os.fstat(fd).st_mode):
                continue
            dup = socket.socket(fileno=os.dup(fd))
            with contextlib.suppress(OSError):
                if dup.family == socket.AF_INET and dup.getsockname() == addr:
                    return dup
            dup.close()
    return None


def _unread(sock: socket.socket) -> int:
    """Bytes in the socket's receive queue that no one has read yet (FIONREAD)."""
    return int(struct.unpack("i", fcntl.ioctl(sock.fileno(), termios.FIONREAD, b"\0\0\0\0"))[0])


def _until(cond: Callable[[], bool], what: str, errors: list[str], limit_s: float = 10.0) -> None:
    """Poll `cond` (a thread's wait on the kernel's state, bounded); a wait that runs out is recorded in `errors`."""
    end = time.monotonic() + limit_s
    while not cond():
        if time.monotonic() > end:
            errors.append(f"no {what} within {limit_s:g} s")
            return
        time.sleep(0.001)


async def _stream_with_the_first_event_held_unread() -> tuple[Any, list[int], list[int], int, str | None]:
    """One streamed answer of two events from a server thread, ordered by events, not sleeps: the server sends the
    first event only while the client's event loop is blocked, the loop stays blocked HOLD_S after that event is in
    its socket, and the second event is sent only once the loop has read the first (no unread bytes left), so they
    are never read together. Returns the record, each event's send bracket (before, after) and when the loop
    unblocked."""
    before: list[int] = []
    after: list[int] = []
    errors: list[str] = []
    unblocked: list[int] = []
    blocked, first_in = threading.Event(), threading.Event()
    loop = asyncio.get_running_loop()
    lsock = socket.create_server(("127.0.0.1", 0))

    def hog() -> None:
        blocked.set()
        first_in.wait(10)  # the scenario: the event loop busy while the first event arrives (a busy client) ...
        time.sleep(HOLD_S)  # ... and for HOLD_S after it is in the socket
        unblocked.append(time.perf_counter_ns())

    def send(conn: socket.socket, ev: bytes) -> None:
        before.append(time.perf_counter_ns())
        conn.sendall(b"%x\r\n%s\r\n" % (len(ev), ev))

    def serve() -> None:
        conn, peer = lsock.accept()
        client = _client_end(peer)
        with conn:
            conn.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)  # each event leaves at once, no Nagle wait
            conn.recv(65536)
            conn.sendall(
                b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nTransfer-Encoding: chunked\r\n"
                b"Connection: close\r\n\r\n"
            )
            loop.call_soon_threadsafe(hog)
            _until(blocked.is_set, "blocked loop", errors)
            send(conn, chunk("a"))
            if client is None:
                errors.append("the client's socket was not found")
            else:
                _until(lambda: _unread(client) > 0, "first event in the client's socket", errors)
            after.append(time.perf_counter_ns())
            first_in.set()
            if client is not None:
                _until(lambda: _unread(client) == 0, "read of the first event", errors)
                client.close()
            send(conn, chunk("b", "stop") + b"data: [DONE]\n\n")
            after.append(time.perf_counter_ns())
            conn.sendall(b"0\r\n\r\n")

    th = threading.Thread(target=serve, daemon=True)
    th.start()
    try:
        async with EngineClient(f"http://127.0.0.1:{lsock.getsockname()[1]}", transport="raw") as c:
            rec = await c.complete("p", model="m", stream=True)
            said = c.chunk_stamps()
    finally:
        first_in.set()
        th.join(10)
        lsock.close()
    assert not errors, errors
    assert rec.ok and rec.text == "ab", rec.failure
    assert len(before) == len(after) == len(rec.chunk_ns) == 2 and len(unblocked) == 1
    return rec, before, after, unblocked[0], said


@kernel_only
async def test_chunk_stamp_is_the_kernel_arrival_not_when_a_busy_loop_reads_it() -> None:
    """Each chunk's time is the kernel's arrival stamp, inside the server's send of it, not when the blocked loop
    got to read it (HOLD_S later for the first event): by ordering, so a loaded box cannot break it."""
    rec, before, after, unblocked, said = await _stream_with_the_first_event_held_unread()
    assert after[0] + HOLD_S * 1e9 <= unblocked  # the first event waited in the socket while the loop was blocked
    for t, b, a in zip(rec.chunk_ns, before, after, strict=True):
        assert b - STAMP_SLACK_NS <= t <= a + STAMP_SLACK_NS, (t - b, a - b)  # stamped while being sent
    assert rec.chunk_ns[0] < unblocked - HOLD_S * 1e9 / 2  # a read-time stamp would be at or after `unblocked`
    assert rec.coalesced_chunks == 0
    assert said == "kernel receive time (SO_TIMESTAMPNS)"


@kernel_only
async def test_events_read_together_share_the_arrival_of_the_last_and_are_counted() -> None:
    rec, sent, _, _ = await _stream_while_the_loop_is_blocked(0.04, 0.12)  # both events wait in the socket
    assert rec.coalesced_chunks == 1 and rec.chunk_ns[0] == rec.chunk_ns[1]
    assert 0 <= rec.chunk_ns[1] - sent[1] < 20_000_000  # TCP reports the receive time of the last bytes read


async def test_request_larger_than_the_socket_buffer_is_sent_whole(scripted: list[_Scripted]) -> None:
    srv = await _Scripted([_sse_reply()]).start()
    scripted.append(srv)
    prompt = "word " * 2_000_000  # 10 MB: many partial sends
    async with EngineClient(srv.url, transport="raw") as c:
        rec = await c.complete(prompt, model="m", stream=True)
    assert rec.ok and rec.text == "ab", rec.failure
    assert prompt.encode() in srv.requests[0]


@pytest.mark.parametrize(
    ("kernel", "user", "says"),
    [
        (0, 0, None),
        (3, 0, "kernel receive time (SO_TIMESTAMPNS)"),
        (0, 2, "user space, on arrival in the event loop (no kernel receive timestamps here)"),
        (3, 2, "mixed: 3 reads kernel-stamped, 2 stamped in user space"),
    ],
)
def test_stamp_source_is_said_as_it_was(kernel: int, user: int, says: str | None) -> None:
    assert stamps.StampCounts(kernel, user).describe() == says


async def test_aiohttp_transport_says_its_stamps_are_user_space(scripted: list[_Scripted]) -> None:
    srv = await _Scripted([_sse_reply()]).start()
    scripted.append(srv)
    async with EngineClient(srv.url, transport="aiohttp") as c:
        assert c.chunk_stamps() is None
        rec = await c.complete("p", model="m", stream=True)
        assert rec.ok
        assert c.chunk_stamps() == "user space, on arrival in the event loop (aiohttp transport)"


@kernel_only
async def test_a_wall_clock_step_never_puts_a_chunk_before_its_request(
    scripted: list[_Scripted], monkeypatch: pytest.MonkeyPatch
) -> None:
    srv = await _Scripted([_sse_reply(), _sse_reply()]).start()
    scripted.append(srv)
    real = time.time_ns
    async with EngineClient(srv.url, transport="raw") as c:
        # Until a read was kernel-stamped: Linux turns receive timestamping on for the whole machine lazily, from a
        # work queue, when the first socket asks, and TCP gives no stamp for segments that arrived before; on a
        # busy CI machine that took longer than five back-to-back requests. Bounded: 40 tries, 50 ms apart.
        for _ in range(40):
            first = await c.complete("p", model="m", stream=True)
            assert first.ok, first.failure
            if c._stamps.kernel:
                break
            srv.replies.append(_sse_reply())
            await asyncio.sleep(0.05)  # a bounded poll (40 tries)
        kernel_before = c._stamps.kernel
        assert kernel_before > 0, c.chunk_stamps()
        monkeypatch.setattr(time, "time_ns", lambda: real() + 10 * 1_000_000_000)  # realtime jumped 10 s ahead
        rec = await c.complete("p", model="m", stream=True)
    assert rec.ok, rec.failure
    assert c._stamps.kernel == kernel_before and c._stamps.user > 0  # a stamp not used is not counted as kernel
    assert "mixed" in (c.chunk_stamps() or "")
    assert rec.send_ns <= rec.chunk_ns[0] <= rec.chunk_ns[-1] <= rec.end_ns
    assert rec.ttft_ns is not None and 0 <= rec.ttft_ns < 1_000_000_000


def test_the_clock_offset_is_read_again_when_its_bracket_was_stretched(monkeypatch: pytest.MonkeyPatch) -> None:
    """realtime is read between two perf_counter reads; a bracket stretched by a descheduling (5 ms here) is
    read again and the narrow one is kept, so the offset is off by nanoseconds, not milliseconds."""
    perf = iter([5_000_000 + 100, 5_000_000 + 200, 5_000_000 + 300])  # after the 1st realtime read: preempted
    real = iter([1_000_000_000_000 + 4_000_000, 1_000_000_000_000 + 5_000_000 + 250])
    monkeypatch.setattr(stamps.time, "perf_counter_ns", lambda: next(perf))
    monkeypatch.setattr(stamps.time, "time_ns", lambda: next(real))
    offset, err = stamps.clock_offset(0)  # first bracket: 0 .. 5,000,100 ns
    assert err == 50 and offset == 1_000_000_000_000 + 5_000_000 + 250 - 5_000_250
