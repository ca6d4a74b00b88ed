"""Resource attacks, on raw sockets: a slow client cannot hold a connection past the head / body / keep-alive
timeouts (a trickle does not re-arm them), one address cannot take the connection table, the total is capped and
service resumes, keep-alive has a request budget, and a big chunked upload is parsed in linear time without
stalling anyone else."""

from __future__ import annotations

import asyncio
import contextlib
import time

import orjson
import pytest

from switchover.testing import await_until
from tests.gateway.conftest import (
    CHAT_BODY,
    Stack,
    chat,
    connect,
    exchange,
    http_request,
    metric_total,
    parse_replies,
    read_all,
    read_reply,
    recorded_stack,
    stack,
)

REFUSED = "switchover_gateway_refused_total"


async def refused_total(port: int) -> float:
    ex = await exchange(port, http_request("GET", "/metrics"))
    assert ex.reply.status == 200, ex.data[:200]
    return metric_total(ex.reply.body.decode(), REFUSED)


async def trickle_until_answered(
    port: int, first: bytes, drip: bytes, every_s: float, bound_s: float
) -> tuple[float, bytes, bool]:
    """Send `first`, then one byte of `drip` every `every_s` until the gateway answers or closes (or `bound_s`);
    returns (seconds from the first drip byte to the answer, what came back, whether it ended)."""
    reader, writer = await connect(port)
    writer.write(first)
    await writer.drain()
    got = bytearray()
    ended = False

    async def read() -> None:
        nonlocal ended
        with contextlib.suppress(ConnectionError):
            while chunk := await reader.read(1 << 16):
                got.extend(chunk)
        ended = True

    reading = asyncio.ensure_future(read())
    t0 = time.perf_counter()
    try:
        i = 0
        while time.perf_counter() - t0 < bound_s and not reading.done():
            try:
                writer.write(drip[i % len(drip) : i % len(drip) + 1])
                await writer.drain()
            except ConnectionError:
                break
            i += 1
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(asyncio.shield(reading), every_s)
        await asyncio.wait({reading}, timeout=0.5)
        return time.perf_counter() - t0, bytes(got), ended
    finally:
        reading.cancel()
        writer.close()


def timed_out_answer(got: bytes) -> None:
    """408 with an OpenAI-shaped error, or the connection closed without a word."""
    if got:
        replies = parse_replies(got)
        assert replies and replies[0].status == 408 and replies[0].error_message(), got[:200]


BODY_HEAD = (
    b"POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
    b"Content-Length: %d\r\n\r\n" % len(CHAT_BODY)
)


@pytest.mark.parametrize(
    ("what", "limits", "start", "trickled"),
    [
        (
            "header",
            {"header_timeout_s": 1, "body_timeout_s": 30},
            b"POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\n",
            b"X-Slow: aaaaaaaaaaaaaaaaaaaa",
        ),
        ("body", {"header_timeout_s": 10, "body_timeout_s": 1}, BODY_HEAD, CHAT_BODY),
    ],
    ids=["head", "body"],
)
async def test_a_head_or_body_trickled_one_byte_every_200_ms_gets_408_within_its_timeout(
    tmp_path, what, limits, start, trickled
):
    async with recorded_stack(tmp_path, limits=limits) as (s, rec):
        took, got, ended = await trickle_until_answered(s.port, start, trickled, every_s=0.2, bound_s=6)
        assert ended, f"still open after {took:.1f} s of trickling: the {what} timeout is re-armed by each byte"
        assert took < 1 + 1.5, f"answered after {took:.2f} s ({what} timeout 1 s)"
        timed_out_answer(got)
        assert rec.connections == 0


async def test_a_chunked_body_trickled_chunk_by_chunk_gets_408_within_the_body_timeout(tmp_path):
    head = (
        b"POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
        b"Transfer-Encoding: chunked\r\n\r\n"
    )
    async with recorded_stack(tmp_path, limits={"header_timeout_s": 10, "body_timeout_s": 1}) as (s, rec):
        took, got, ended = await trickle_until_answered(s.port, head, b"1\r\n \r\n", every_s=0.05, bound_s=6)
        assert ended and took < 1 + 1.5, f"ended={ended} after {took:.2f} s (body_timeout_s 1)"
        timed_out_answer(got)
        assert rec.connections == 0


async def test_an_idle_kept_alive_connection_is_closed_after_the_keepalive_timeout(tmp_path):
    async with recorded_stack(tmp_path, limits={"keepalive_timeout_s": 1}) as (s, _rec):
        reader, writer = await connect(s.port)
        writer.write(http_request("GET", "/health", close=False))
        assert (await read_reply(reader)).status == 200
        t0 = time.perf_counter()
        rest, closed = await read_all(reader, 4)
        writer.close()
        assert closed and rest == b"", f"not closed after {time.perf_counter() - t0:.1f} s idle"
        assert time.perf_counter() - t0 < 1 + 1.5


async def test_a_connection_that_never_sends_a_byte_is_closed(tmp_path):
    async with recorded_stack(tmp_path, limits={"header_timeout_s": 1, "keepalive_timeout_s": 1}) as (s, _rec):
        reader, writer = await connect(s.port)
        t0 = time.perf_counter()
        got, closed = await read_all(reader, 4)
        writer.close()
        assert closed, "a silent connection was held open for 4 s"
        assert time.perf_counter() - t0 < 1 + 1.5
        timed_out_answer(got)


async def hold(port: int, n: int, source: str | None = None) -> list[tuple[asyncio.StreamReader, asyncio.StreamWriter]]:
    conns = []
    for _ in range(n):
        with contextlib.suppress(ConnectionError):
            conns.append(await connect(port, source))
    return conns


async def classify(conns: list[tuple[asyncio.StreamReader, asyncio.StreamWriter]]) -> tuple[int, list[bytes]]:
    """(connections still open and silent, what the others got before they closed)."""
    held, refused = 0, []
    for reader, _ in conns:
        try:
            first = await asyncio.wait_for(reader.read(4096), 0.05)
        except TimeoutError:
            held += 1
            continue
        except ConnectionError:
            refused.append(b"")
            continue
        rest, _closed = await read_all(reader, 1.0)
        refused.append(first + rest)
    return held, refused


async def wait_refused(s: Stack, before: float, n: int) -> None:
    """Wait until the gateway has counted `n` more refusals (read in-process: no connection needed)."""
    await await_until(
        lambda: metric_total(s.gw.metrics.render().decode(), REFUSED) - before >= n,
        5,
        f"{n} refused connections counted",
    )


def refused_answers_ok(answers: list[bytes]) -> None:
    for got in answers:
        if got:
            replies = parse_replies(got)
            assert replies and replies[0].status == 503 and replies[0].closes, got[:200]


def close_all(conns: list[tuple[asyncio.StreamReader, asyncio.StreamWriter]]) -> None:
    for _, writer in conns:
        writer.close()


async def test_one_client_address_cannot_hold_more_than_max_connections_per_client(tmp_path):
    async with recorded_stack(tmp_path, weight=0, limits={"max_connections_per_client": 20}) as (s, rec):
        before = await refused_total(s.port)
        conns = await hold(s.port, 60, source="127.0.0.2")
        try:
            await wait_refused(s, before, 40 - (60 - len(conns)))
            held, refused = await classify(conns)
            assert held <= 20, f"{held} idle connections from one address were kept (limit 20)"
            assert len(refused) >= 40 - (60 - len(conns))
            refused_answers_ok(refused)
            health = await exchange(s.port, http_request("GET", "/health"))  # another address is still served
            assert health.reply.status == 200
            proxied = await exchange(s.port, http_request(body=CHAT_BODY))
            assert proxied.reply.status == 200 and len(rec.requests) == 1
            assert await refused_total(s.port) > before
        finally:
            close_all(conns)


async def test_connections_over_max_connections_are_refused_and_service_resumes_when_they_go(tmp_path):
    async with recorded_stack(tmp_path, weight=0, limits={"max_connections": 30}) as (s, rec):
        before = await refused_total(s.port)
        conns = await hold(s.port, 60)
        try:
            await wait_refused(s, before, 30 - (60 - len(conns)))
            held, refused = await classify(conns)
            assert held <= 30, f"{held} connections kept open (max_connections 30)"
            assert len(refused) >= 30 - (60 - len(conns))
            refused_answers_ok(refused)
        finally:
            close_all(conns)
        assert s.gw.front is not None
        await await_until(lambda: len(s.gw.front.conns) == 0, 5, "the gateway to see the held connections go")
        health = await exchange(s.port, http_request("GET", "/health"))
        assert health.reply.status == 200, health.data[:200]
        proxied = await exchange(s.port, http_request(body=CHAT_BODY))
        assert proxied.reply.status == 200 and len(rec.requests) == 1
        assert await refused_total(s.port) > before


async def test_the_keepalive_requests_budget_closes_the_connection_after_the_last_answer(tmp_path):
    async with recorded_stack(tmp_path, weight=0, limits={"keepalive_requests": 3}) as (s, rec):
        reader, writer = await connect(s.port)
        try:
            answers = []
            for request in (
                http_request("GET", "/health", close=False),
                http_request("GET", "/v1/models", close=False),
                http_request(body=CHAT_BODY, close=False),
            ):
                writer.write(request)
                await writer.drain()
                answers.append(await read_reply(reader))
            assert [a.status for a in answers] == [200, 200, 200]
            assert [a.closes for a in answers] == [False, False, True]
            rest, closed = await read_all(reader, 2)
            assert closed and rest == b"", "the connection stayed open after the last budgeted request"
            assert len(rec.requests) == 2
        finally:
            writer.close()


async def upload_while_polling_health(
    port: int, body: bytes, chunk: int, write: int, bound_s: float
) -> tuple[bytes, list[float], float]:
    """POST `body` in chunks of `chunk` bytes (written `write` bytes at a time) while another connection asks
    /health every 100 ms; returns (the answer, the health latencies, seconds the upload took)."""
    latencies: list[float] = []
    uploading = True

    async def poll_health() -> None:
        reader, writer = await connect(port)
        try:
            while uploading:
                t0 = time.perf_counter()
                writer.write(http_request("GET", "/health", close=False))
                reply = await read_reply(reader, timeout=5)
                latencies.append(time.perf_counter() - t0)
                assert reply.status == 200
                await asyncio.sleep(0.1)  # the scenario: a health check every 100 ms during the upload
        finally:
            writer.close()

    poller = asyncio.ensure_future(poll_health())
    t0 = time.perf_counter()
    got = b""
    try:
        async with asyncio.timeout(bound_s):
            reader, writer = await connect(port)
            writer.write(
                b"POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
                b"Transfer-Encoding: chunked\r\nConnection: close\r\n\r\n"
            )
            wire = bytearray()
            for i in range(0, len(body), chunk):
                part = body[i : i + chunk]
                wire += b"%x\r\n" % len(part) + part + b"\r\n"
                if len(wire) >= write:
                    writer.write(bytes(wire))
                    wire.clear()
                    await writer.drain()
            writer.write(bytes(wire) + b"0\r\n\r\n")
            await writer.drain()
            got, _closed = await read_all(reader, bound_s)
            writer.close()
    except TimeoutError:
        pass
    finally:
        uploading = False
        with contextlib.suppress(Exception):
            await asyncio.wait_for(poller, 6)
    return got, latencies, time.perf_counter() - t0


def chat_of(size: int) -> bytes:
    return (
        b'{"model": "client-model", "max_tokens": 1, "messages": [{"role": "user", "content": "' + b"a" * size + b'"}]}'
    )


@pytest.mark.timeout(90)
async def test_a_40_mib_chunked_upload_in_1_mib_chunks_is_accepted_and_health_stays_fast(tmp_path):
    body = chat_of(40 << 20)
    async with recorded_stack(tmp_path, weight=0, limits={"max_body_bytes": 64 << 20}) as (s, rec):
        got, latencies, took = await upload_while_polling_health(s.port, body, 1 << 20, 1 << 20, bound_s=30)
        replies = parse_replies(got)
        assert replies and replies[0].status == 200, f"after {took:.1f} s: {got[:300]!r}"
        assert [r.body_len for r in rec.requests] == [len(body)]
        assert latencies, "health was never answered during the upload"
        assert max(latencies) < 1.0, f"/health took {max(latencies):.2f} s during the upload ({took:.1f} s)"


@pytest.mark.timeout(90)
async def test_a_body_of_half_a_million_small_chunks_is_parsed_in_linear_time(tmp_path):
    """16 MiB in 32-byte chunks, written 64 KiB at a time: a parser that rescans the chunks it already has on
    every read is quadratic here (measured on the old front: 8 MiB 3.5 s, 16 MiB 13.6 s, /health 1.4 s); a linear
    one takes a fraction of the bound and never blocks the loop for long."""
    body = chat_of(16 << 20)
    async with recorded_stack(tmp_path, weight=0) as (s, rec):
        got, latencies, took = await upload_while_polling_health(s.port, body, 32, 64 << 10, bound_s=20)
        replies = parse_replies(got)
        assert replies and replies[0].status == 200, f"no answer after {took:.1f} s: {got[:300]!r}"
        assert [r.body_len for r in rec.requests] == [len(body)]
        assert took < 8, f"the upload took {took:.1f} s"
        assert latencies and max(latencies) < 1.0, f"/health took {max(latencies or [0]):.2f} s during the upload"


async def test_a_client_that_stops_reading_a_stream_is_cut_off_with_its_upstream(tmp_path):
    """A streamed answer to a client that reads nothing must not hold the connection and the upstream forever."""
    import socket

    async with stack(tmp_path, weight=100, limits={"send_timeout_s": 1}) as s:
        sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)  # a tiny window: the gateway's writes stall
        sock.setblocking(False)
        await asyncio.get_running_loop().sock_connect(sock, ("127.0.0.1", s.port))
        body = orjson.dumps(chat(stream=True, max_tokens=60_000))
        sock.send(
            b"POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
            b"Content-Length: %d\r\n\r\n%b" % (len(body), body)
        )
        try:
            rows = await await_until(s.rows, 30, "the request's ledger row")
            assert [r.outcome for r in rows] == ["client_disconnected"], rows
            async with s.http.get(s.url + "/metrics") as r:
                assert 'switchover_gateway_refused_total{reason="send_timeout"} 1.0' in await r.text()
            await await_until(lambda: not s.new.stats.in_flight, 5, "no request in flight upstream")
            # nothing is held: the upstream stream was closed, or had already been read whole into socket buffers
            assert s.new.stats.in_flight == 0 and s.new.stats.cancelled + s.new.stats.completed == 1
            assert len(s.gw.inflight) == 0
        finally:
            sock.close()
