"""The loopback HTTP/1.1 front (httpfront/) on raw sockets: bodies (length, chunked, 100-continue), keep-alive and
pipelining, HEAD, errors with their statuses, streamed responses with back-pressure, a leaving client."""

from __future__ import annotations

import asyncio
import re
import socket
from collections.abc import AsyncIterator
from typing import Any
from urllib.parse import parse_qs

import orjson
import pytest

from switchover.config.gateway import LimitsConfig
from switchover.httpfront.listener import serve_front
from switchover.httpfront.messages import FrontRequest, json_reply
from switchover.testing import await_holds, await_until


class Echo:
    """Answers with what it got; /stream streams `n` chunks (each padded to `size` bytes); /slow waits until
    cancelled. Counts the stream's writes, and those held back by a full socket buffer (the paused path)."""

    def __init__(self) -> None:
        self.cancelled = asyncio.Event()
        self.started = asyncio.Event()
        self.written = 0
        self.held_writes = 0

    async def _write(self, resp: Any, data: bytes) -> None:
        write = asyncio.ensure_future(resp.write(data))
        await asyncio.sleep(0)  # one step: a write that is not waiting for the client's buffer is done by now
        if not write.done():
            self.held_writes += 1
        await write
        self.written += 1

    async def __call__(self, req: FrontRequest) -> Any:
        body = req.body
        if req.path == "/stream":
            q = parse_qs(req.target.query)
            n, size = int(q.get("n", ["3"])[0]), int(q.get("size", ["0"])[0])
            resp = req.open_stream(200, {"Content-Type": "text/event-stream"})
            for i in range(n):
                event = b"data: %d" % i
                await self._write(resp, event + b" " * max(0, size - len(event) - 2) + b"\n\n")
            await resp.write_eof(b"data: [DONE]\n\n")
            return resp
        if req.path == "/slow":
            self.started.set()
            try:
                await asyncio.sleep(30)  # the scenario: a handler that runs until its client leaves
            except asyncio.CancelledError:
                self.cancelled.set()
                raise
        if req.path == "/boom":
            raise RuntimeError("handler bug")
        out = {
            "method": req.method,
            "path": req.path,
            "qs": req.target.query,
            "len": len(body),
            "body": body.decode(),
            "tenant": req.headers.get("X-Tenant-Id"),
        }
        return json_reply(out)


@pytest.fixture
async def front() -> AsyncIterator[tuple[int, Echo]]:
    echo = Echo()
    async with serve_front(echo, "127.0.0.1", 0, LimitsConfig(max_body_bytes=1000)) as (server, _):
        yield server.sockets[0].getsockname()[1], echo


async def _exchange(port: int, raw: bytes, *, read_until_close: bool = True) -> bytes:
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    writer.write(raw)
    await writer.drain()
    data = await asyncio.wait_for(reader.read(), 5) if read_until_close else await reader.read(65536)
    writer.close()
    return data


def _json_body(response: bytes) -> dict[str, Any]:
    return orjson.loads(response.split(b"\r\n\r\n", 1)[1])


async def test_a_request_with_a_body_and_a_query_is_handled(front: tuple[int, Echo]) -> None:
    port, _ = front
    out = await _exchange(
        port,
        b"POST /v1/x?a=1 HTTP/1.1\r\nHost: h\r\nX-Tenant-Id: t7\r\nContent-Length: 5\r\nConnection: close\r\n\r\nhello",
    )
    assert out.startswith(b"HTTP/1.1 200 OK\r\n") and b"Connection: close" in out
    assert _json_body(out) == {
        "method": "POST",
        "path": "/v1/x",
        "qs": "a=1",
        "len": 5,
        "body": "hello",
        "tenant": "t7",
    }


async def test_chunked_request_bodies_are_decoded(front: tuple[int, Echo]) -> None:
    port, _ = front
    out = await _exchange(
        port,
        b"POST /c HTTP/1.1\r\nHost: h\r\nTransfer-Encoding: chunked\r\n"
        b"Connection: close\r\n\r\n3\r\nabc\r\n4;ext=1\r\ndefg\r\n0\r\n\r\n",
    )
    assert _json_body(out)["body"] == "abcdefg"


async def test_expect_100_continue_is_answered_before_the_body(front: tuple[int, Echo]) -> None:
    port, _ = front
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    writer.write(
        b"POST /e HTTP/1.1\r\nHost: h\r\nContent-Length: 3\r\nExpect: 100-continue\r\nConnection: close\r\n\r\n"
    )
    await writer.drain()
    interim = await asyncio.wait_for(reader.readuntil(b"\r\n\r\n"), 2)  # a client waits for this, not 1 s
    assert interim == b"HTTP/1.1 100 Continue\r\n\r\n"
    writer.write(b"xyz")
    out = await asyncio.wait_for(reader.read(), 5)
    writer.close()
    assert _json_body(out)["body"] == "xyz"


async def test_keep_alive_and_pipelined_requests_are_answered_in_order(front: tuple[int, Echo]) -> None:
    port, _ = front
    reqs = b"".join(b"GET /r%d HTTP/1.1\r\nHost: h\r\n\r\n" % i for i in range(3))
    out = await _exchange(port, reqs + b"GET /last HTTP/1.1\r\nHost: h\r\nConnection: close\r\n\r\n")
    paths = [
        orjson.loads(part.split(b"\r\n\r\n", 1)[1].split(b"HTTP/1.1")[0])["path"]
        for part in out.split(b"HTTP/1.1 200 OK")[1:]
    ]
    assert paths == ["/r0", "/r1", "/r2", "/last"]


async def test_http_1_0_closes_unless_asked_to_keep_alive(front: tuple[int, Echo]) -> None:
    port, _ = front
    out = await _exchange(port, b"GET /old HTTP/1.0\r\n\r\n")  # read() returns: the server closed
    assert b"Connection: close" in out and _json_body(out)["path"] == "/old"


async def test_head_gets_headers_without_a_body(front: tuple[int, Echo]) -> None:
    port, _ = front
    out = await _exchange(port, b"HEAD /h HTTP/1.1\r\nHost: h\r\nConnection: close\r\n\r\n")
    head, _, body = out.partition(b"\r\n\r\n")
    assert b"Content-Length: " in head and not head.endswith(b"Content-Length: 0") and body == b""


@pytest.mark.parametrize(
    ("raw", "status"),
    [
        (b"GARBAGE\r\n\r\n", 400),
        (b"GET / HTTP/2.0\r\n\r\n", 505),
        (b"GET / HTTP/1.1\r\nHost: h\r\nno colon here\r\n\r\n", 400),
        (b"POST / HTTP/1.1\r\nHost: h\r\nContent-Length: nope\r\n\r\n", 400),
        (b"POST / HTTP/1.1\r\nHost: h\r\nContent-Length: 5000\r\n\r\n", 413),  # max_body is 1000
        (b"POST / HTTP/1.1\r\nHost: h\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n", 400),
        (b"GET / HTTP/1.1\r\nHost: h\r\nX-Big: " + b"a" * 70_000, 431),
        (b"GET / HTTP/1.1\r\nHost: h\r\n" + b"X-Many: 1\r\n" * 101 + b"\r\n", 431),
        (b"GET / HTTP/1.1\r\n\r\n", 400),  # no Host
        (b"GET / HTTP/1.1\r\nHost: a\r\nHost: b\r\n\r\n", 400),
        (b"GET /v1/models HTTP/1.1\nHost: h\n\n", 400),  # LF only: answered at once, not at the idle timer
        (b"GET http://127.0.0.1:9/x HTTP/1.1\r\nHost: h\r\n\r\n", 400),
        (b"CONNECT 127.0.0.1:9 HTTP/1.1\r\nHost: h\r\n\r\n", 405),
        (b"TRACE / HTTP/1.1\r\nHost: h\r\n\r\n", 405),
        (b"GET / HTTP/1.1\r\nHost: h\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n\r\n", 400),
        (b"POST / HTTP/1.1\r\nHost: h\r\nTransfer-Encoding: gzip, chunked\r\n\r\n2\r\nhi\r\n0\r\n\r\n", 400),
        (b"POST / HTTP/1.0\r\nTransfer-Encoding: chunked\r\n\r\n2\r\nhi\r\n0\r\n\r\n", 400),
        (b"POST / HTTP/1.1\r\nHost: h\r\nExpect: magic\r\nContent-Length: 1\r\n\r\nx", 417),
    ],
)
async def test_bad_requests_get_their_status_and_the_connection_closes(
    front: tuple[int, Echo], raw: bytes, status: int
) -> None:
    port, _ = front
    out = await _exchange(port, raw)
    assert out.startswith(b"HTTP/1.1 %d " % status), out[:80]
    assert orjson.loads(out.split(b"\r\n\r\n", 1)[1])["error"]["code"] == status


async def test_a_handler_error_is_a_500_not_a_hang(front: tuple[int, Echo]) -> None:
    port, _ = front
    out = await _exchange(port, b"GET /boom HTTP/1.1\r\nHost: h\r\n\r\n")
    assert out.startswith(b"HTTP/1.1 500 ")


async def test_a_streamed_response_is_chunked_and_complete(front: tuple[int, Echo]) -> None:
    port, _ = front
    out = await _exchange(port, b"GET /stream?n=3 HTTP/1.1\r\nHost: h\r\nConnection: close\r\n\r\n")
    head, _, body = out.partition(b"\r\n\r\n")
    assert b"Transfer-Encoding: chunked" in head
    decoded, rest = b"", body
    while True:
        size_line, _, rest = rest.partition(b"\r\n")
        n = int(size_line, 16)
        if n == 0:
            break
        decoded, rest = decoded + rest[:n], rest[n + 2 :]
    assert decoded == b"data: 0\n\ndata: 1\n\ndata: 2\n\ndata: [DONE]\n\n"


async def test_a_large_stream_to_a_slow_reader_waits_for_it(front: tuple[int, Echo]) -> None:
    """Back-pressure: 16 MiB of events (more than every socket buffer: the client's receive buffer is made small)
    to a reader that starts late: the handler's writes are held back (the paused path) until it reads; then every
    event arrives, in order."""
    port, echo = front
    n, size = 2048, 8192
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)  # before connect: the window stays small
    sock.setblocking(False)
    await asyncio.get_running_loop().sock_connect(sock, ("127.0.0.1", port))
    reader, writer = await asyncio.open_connection(sock=sock)
    writer.write(b"GET /stream?n=%d&size=%d HTTP/1.1\r\nHost: h\r\nConnection: close\r\n\r\n" % (n, size))
    await writer.drain()
    await await_until(lambda: echo.held_writes, 20, "a stream write held back by the client's full buffer")
    assert echo.written < n  # waiting for the reader, not buffering the whole stream
    out = await asyncio.wait_for(reader.read(), 60)
    writer.close()
    assert echo.written == n and out.count(b"data: ") == n + 1 and out.endswith(b"0\r\n\r\n")
    assert [int(i) for i in re.findall(rb"data: (\d+) ", out)] == list(range(n))  # all of them, in order


async def test_a_client_that_leaves_cancels_its_handler(front: tuple[int, Echo]) -> None:
    port, echo = front
    _reader, writer = await asyncio.open_connection("127.0.0.1", port)
    writer.write(b"GET /slow HTTP/1.1\r\nHost: h\r\n\r\n")
    await writer.drain()
    await asyncio.wait_for(echo.started.wait(), 5)
    writer.close()
    await asyncio.wait_for(echo.cancelled.wait(), 5)


async def test_an_idle_connection_is_closed_and_a_busy_one_is_not() -> None:
    echo = Echo()
    limits = LimitsConfig(max_body_bytes=1000, keepalive_timeout_s=0.3)
    async with serve_front(echo, "127.0.0.1", 0, limits) as (server, _):
        port = server.sockets[0].getsockname()[1]
        reader, writer = await asyncio.open_connection("127.0.0.1", port)
        writer.write(b"GET /a HTTP/1.1\r\nHost: h\r\n\r\n")
        await writer.drain()
        assert (await asyncio.wait_for(reader.readuntil(b"}"), 2)).startswith(b"HTTP/1.1 200 OK")
        assert await asyncio.wait_for(reader.read(), 2) == b""  # idle after its answer: closed by the server
        writer.close()
        reader, writer = await asyncio.open_connection("127.0.0.1", port)
        writer.write(b"GET /slow HTTP/1.1\r\nHost: h\r\n\r\n")  # a request in progress is never idle
        await writer.drain()
        await asyncio.wait_for(echo.started.wait(), 5)
        # what must not happen: the keep-alive timeout (0.3 s) closing a connection whose request is in progress
        await await_holds(lambda: not echo.cancelled.is_set(), 0.6, "the busy connection kept open")
        writer.close()
        await asyncio.wait_for(echo.cancelled.wait(), 5)
