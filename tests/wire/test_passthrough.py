"""The pass-through HTTP/1.1 client (the gateway's old / new arms) against a scripted raw server: body framings
under any split, keep-alive reuse, the retry on a connection the server closed while idle, and failures."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator

import pytest
from yarl import URL

from switchover.testbed.processes import free_port
from switchover.testing import await_until
from switchover.wire.passthrough import HIGH_WATER, H1Pool, UpstreamConnectError, UpstreamDisconnected


class Scripted:
    """Each request gets the next scripted response: byte pieces written one by one, then maybe a close."""

    def __init__(self, responses: list[tuple[list[bytes], bool]]) -> None:
        self.responses = responses
        self.requests: list[bytes] = []
        self.connections = 0
        self.closed = 0  # connections this server has closed

    async def handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.connections += 1
        try:
            while self.responses:
                head = await reader.readuntil(b"\r\n\r\n")
                length = next(
                    (
                        int(line.split(b":")[1])
                        for line in head.split(b"\r\n")
                        if line.lower().startswith(b"content-length:")
                    ),
                    0,
                )
                self.requests.append(head + await reader.readexactly(length))
                pieces, close = self.responses.pop(0)
                for piece in pieces:
                    writer.write(piece)
                    await writer.drain()
                    await asyncio.sleep(0.001)  # the scenario: each piece reaches the client on its own
                if close:
                    break
        except (asyncio.IncompleteReadError, ConnectionError):
            pass
        writer.close()
        self.closed += 1


@contextlib.asynccontextmanager
async def serve(script: Scripted) -> AsyncIterator[URL]:
    port = free_port()
    server = await asyncio.start_server(script.handle, "127.0.0.1", port)
    try:
        yield URL(f"http://127.0.0.1:{port}/v1/chat/completions?x=1")
    finally:
        server.close()


def splits(raw: bytes, step: int) -> list[bytes]:
    return [raw[i : i + step] for i in range(0, len(raw), step)]


CHUNKED = (
    b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nTransfer-Encoding: chunked\r\n\r\n"
    b"7;ext=1\r\ndata: a\r\n5\r\n\n\n\r\nb\r\n0\r\nX-Trailer: t\r\n\r\n"
)


@pytest.mark.parametrize("step", [1, 2, 5, 1000])
async def test_bodies_arrive_whole_under_any_split(step):
    length = b"HTTP/1.1 200 OK\r\nContent-Length: 11\r\nX-A: 1\r\n\r\nhello world"
    interim = b"HTTP/1.1 100 Continue\r\n\r\n" + length
    script = Scripted(
        [
            (splits(CHUNKED, step), False),
            (splits(interim, step), False),
            (splits(b"HTTP/1.1 200 OK\r\nConnection: close\r\n\r\nuntil close", step), True),
        ]
    )
    pool = H1Pool()
    async with serve(script) as url:
        resp = await pool.request("POST", url, [("Content-Type", "application/json")], b"{}", 1.0)
        assert resp.status == 200 and resp.headers["content-type"] == "text/event-stream"
        assert await resp.read() == b"data: a\n\n\r\nb"
        resp.release()
        resp = await pool.request("GET", url, [], None, 1.0)
        assert (resp.status, resp.headers["X-A"], await resp.read()) == (200, "1", b"hello world")
        resp.release()
        resp = await pool.request("GET", url, [], None, 1.0)
        assert await resp.read() == b"until close" and not resp.keep_alive
        resp.release()
    assert script.connections == 1  # both keep-alive responses reused the first connection
    first = script.requests[0]
    assert first.startswith(b"POST /v1/chat/completions?x=1 HTTP/1.1\r\nHost: 127.0.0.1:")
    assert b"Content-Length: 2\r\n" in first and first.endswith(b"\r\n\r\n{}")
    pool.close()


async def test_a_connection_the_server_closed_while_idle_is_not_reused():
    ok = b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok"
    script = Scripted([([ok], True), ([ok], False)])  # the server closes the first connection quietly
    pool = H1Pool()
    async with serve(script) as url:
        for i in range(2):
            resp = await pool.request("GET", url, [], None, 1.0)
            assert await resp.read() == b"ok"
            resp.release()
            await await_until(
                lambda i=i: script.closed > i and all(c.closed for cs in pool._idle.values() for c in cs),
                5,
                "the pool seeing the server's close of the idle connection",
            )
    assert script.connections == 2 and len(script.requests) == 2  # a fresh connection, nothing sent twice
    pool.close()


async def test_a_kept_alive_connection_dropped_on_reuse_is_retried_once_on_a_fresh_one():
    """The retry branch: the server keeps the first connection, then closes it on the next request without a
    byte (its idle timeout struck as the request came); the pool resends that request once on a fresh one."""
    ok = b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok"
    script = Scripted([([ok], False), ([], True), ([ok], False)])
    pool = H1Pool()
    async with serve(script) as url:
        for _ in range(2):
            resp = await pool.request("GET", url, [], None, 1.0)
            assert await resp.read() == b"ok"
            resp.release()
    assert script.connections == 2 and len(script.requests) == 3  # the second request went twice
    assert script.requests[1] == script.requests[2]
    pool.close()


async def test_a_second_drop_before_any_byte_is_not_retried_again():
    ok = b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok"
    script = Scripted([([ok], False), ([], True), ([], True)])
    pool = H1Pool()
    async with serve(script) as url:
        resp = await pool.request("GET", url, [], None, 1.0)
        assert await resp.read() == b"ok"
        resp.release()
        with pytest.raises(UpstreamDisconnected):
            await pool.request("GET", url, [], None, 1.0)
    assert script.connections == 2 and len(script.requests) == 3  # one retry, not more
    pool.close()


async def test_a_body_cut_short_raises_and_a_closed_port_is_a_connect_error():
    script = Scripted([([b"HTTP/1.1 200 OK\r\nContent-Length: 10\r\n\r\nabc"], True)])
    pool = H1Pool()
    async with serve(script) as url:
        resp = await pool.request("GET", url, [], None, 1.0)
        assert await resp.readany() == b"abc"
        with pytest.raises(UpstreamDisconnected):
            await resp.readany()
        resp.close()
    with pytest.raises(UpstreamConnectError):
        await pool.request("GET", URL(f"http://127.0.0.1:{free_port()}/"), [], None, 1.0)


async def test_a_large_body_is_read_with_flow_control():
    body = bytes(range(256)) * 8192  # 2 MiB, above the high-water mark
    head = f"HTTP/1.1 200 OK\r\nContent-Length: {len(body)}\r\n\r\n".encode()
    script = Scripted([([head + body], False)])
    pool = H1Pool()
    async with serve(script) as url:
        resp = await pool.request("GET", url, [], None, 1.0)
        conn = resp._conn
        assert conn is not None
        await await_until(lambda: conn.paused, 5, "reading paused at the high-water mark")
        assert resp._size > HIGH_WATER  # buffered past the mark, then the socket was no longer read
        assert await resp.read() == body
        assert not conn.paused
        resp.release()
    pool.close()


async def test_head_answer_has_no_body_and_bytes_past_the_end_fail_the_response():
    head = b"HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\n"
    script = Scripted([([head], False), ([b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nokEXTRA"], False)])
    pool = H1Pool()
    async with serve(script) as url:
        resp = await pool.request("HEAD", url, [], None, 1.0)
        assert resp.status == 200 and await resp.read() == b"" and resp.keep_alive
        resp.release()
        resp = await pool.request("GET", url, [], None, 1.0)  # the same connection, kept alive
        with pytest.raises(UpstreamDisconnected):
            await resp.read()
        resp.close()
    assert script.connections == 1
    pool.close()
