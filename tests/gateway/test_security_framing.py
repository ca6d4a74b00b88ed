"""Attacks on request framing, on raw sockets: every ambiguous or malformed message is answered by the gateway
itself (400 / 431 / 413 / 505, OpenAI-shaped error, `Connection: close`), the connection is closed, and NOTHING
reaches either upstream (no request smuggling, no header injection, no hop-by-hop leak)."""

from __future__ import annotations

import asyncio
import contextlib
import re

import pytest

from switchover.testing import await_holds
from tests.gateway.conftest import (
    CHAT_BODY,
    Exchange,
    Recorders,
    connect,
    exchange,
    http_request,
    read_all,
    recorded_stack,
    request_rows,
)

B = CHAT_BODY
START = b"POST /v1/chat/completions HTTP/1.1"
SMUGGLED = b"GET /admin HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n"


def req(*lines: bytes, body: bytes = B, start: bytes = START, length: bool = True) -> bytes:
    """A chat request with extra raw header lines; Content-Length of `body` unless `length` is False."""
    head = [start, b"Host: 127.0.0.1", b"Content-Type: application/json"]
    if length:
        head.append(b"Content-Length: %d" % len(body))
    return b"\r\n".join([*head, *lines]) + b"\r\n\r\n" + body


def chunks(body: bytes, size: int = 16, size_fmt: bytes = b"%x", sep: bytes = b"\r\n") -> bytes:
    """`body` in chunked encoding; `size_fmt` / `sep` let a test break the chunk framing."""
    out = b""
    for i in range(0, len(body), size):
        part = body[i : i + size]
        out += (size_fmt % len(part)) + b"\r\n" + part + sep
    return out + b"0\r\n\r\n"


TE = b"Transfer-Encoding: chunked"

FRAMING_400 = {
    "bare_lf_in_header_value": req(b"X-Note: a\nb"),
    "bare_cr_in_header_value": req(b"X-Note: a\rb"),
    "nul_in_header_value": req(b"X-Note: a\x00b"),
    "obs_fold_space": req(b"X-Note: a", b" folded"),
    "obs_fold_tab": req(b"X-Note: a", b"\tfolded"),
    "x_request_id_lf_injects_set_cookie": req(b"X-Request-Id: abc\nSet-Cookie: x=1"),
    "x_request_id_cr_injects_set_cookie": req(b"X-Request-Id: abc\rSet-Cookie: x=1"),
    "space_in_header_name": req(b"X Note: 1"),
    "space_before_colon": req(b"X-Note : 1"),
    "non_token_header_name": req(b"X(Note): 1"),
    "header_line_without_colon": req(b"no colon here"),
    "two_content_lengths_same": req(b"Content-Length: %d" % len(B)),
    "two_content_lengths_different": req(b"Content-Length: %d" % len(B), body=B + b" "),
    "content_length_plus": req(b"Content-Length: +%d" % len(B), length=False),
    "content_length_underscore": req(b"Content-Length: 1_0", body=b'{"a": 1}  ', length=False),
    "content_length_negative": req(b"Content-Length: -1", length=False),
    "content_length_two_numbers": req(b"Content-Length: 5 5", length=False),
    "content_length_hex": req(b"Content-Length: 0x10", body=b"x" * 16, length=False),
    "content_length_with_transfer_encoding": req(TE, body=chunks(B + b"\r\n0\r\n\r\n" + SMUGGLED)),
    "transfer_encoding_gzip": req(b"Transfer-Encoding: gzip", body=chunks(B), length=False),
    "transfer_encoding_gzip_chunked": req(b"Transfer-Encoding: gzip, chunked", body=chunks(B), length=False),
    "transfer_encoding_xchunked": req(b"Transfer-Encoding: xchunked", body=chunks(B), length=False),
    "transfer_encoding_chunked_twice_in_one": req(b"Transfer-Encoding: chunked, chunked", body=chunks(B), length=False),
    "transfer_encoding_two_headers": req(TE, TE, body=chunks(B), length=False),
    "transfer_encoding_identity": req(b"Transfer-Encoding: identity", length=True),
    "chunk_data_without_crlf": req(TE, body=chunks(B, sep=b"XX"), length=False),
    "chunk_size_not_hex": req(TE, body=b"zz\r\n" + B + b"\r\n0\r\n\r\n", length=False),
    "chunk_size_with_0x": req(TE, body=chunks(B, size_fmt=b"0x%x"), length=False),
    "chunk_size_with_plus": req(TE, body=chunks(B, size_fmt=b"+%x"), length=False),
    "chunk_size_with_leading_space": req(TE, body=chunks(B, size_fmt=b" %x"), length=False),
    "chunk_size_overflow": req(TE, body=b"1" + b"0" * 40 + b"\r\n" + B + b"\r\n0\r\n\r\n", length=False),
    "transfer_encoding_in_http_1_0": req(TE, body=chunks(B), start=b"POST /v1/chat/completions HTTP/1.0", length=False),
    "upgrade_websocket": http_request(
        "GET",
        "/v1/models",
        close=False,
        headers=[
            ("Connection", "Upgrade"),
            ("Upgrade", "websocket"),
            ("Sec-WebSocket-Version", "13"),
            ("Sec-WebSocket-Key", "dGhlIHNhbXBsZSBub25jZQ=="),
        ],
    ),
    "upgrade_h2c": http_request(
        "GET",
        "/v1/models",
        close=False,
        headers=[("Connection", "Upgrade, HTTP2-Settings"), ("Upgrade", "h2c"), ("HTTP2-Settings", "AAMAAABkAAQAAP__")],
    ),
    "connection_upgrade_alone": http_request("GET", "/v1/models", close=False, headers=[("Connection", "Upgrade")]),
    "request_line_tab": b"GET\t/v1/models HTTP/1.1\r\nHost: x\r\n\r\n",
}


async def assert_refused(s_rec: Recorders, ex: Exchange, status: int | tuple[int, ...]) -> None:
    """The gateway answered `status` itself with an OpenAI-shaped error, said Connection: close, closed the
    connection, and forwarded nothing."""
    statuses = (status,) if isinstance(status, int) else status
    assert ex.replies, f"no response at all (closed={ex.closed}, {ex.elapsed_s:.2f} s): {ex.data[:200]!r}"
    r = ex.reply
    assert r.status in statuses, f"status {r.status}, want {statuses}: {ex.data[:300]!r}"
    assert r.error_message(), f"not an OpenAI-shaped error body: {r.body[:200]!r}"
    assert r.closes, f"no Connection: close on a {r.status}: {r.headers}"
    assert ex.closed, "the gateway kept the connection open after a framing error"
    assert len(ex.replies) == 1, f"{len(ex.replies)} responses: a smuggled request was answered"
    assert "set-cookie" not in {k for k, _ in r.headers}
    await await_holds(lambda: s_rec.connections == 0, 0.1, "nothing forwarded upstream")  # a forward would be quick


STATUS = {"chunk_size_overflow": (400, 413)}  # too big to be a size, or a body over the limit: both refuse it


@pytest.mark.parametrize("case", list(FRAMING_400))
async def test_ambiguous_or_malformed_framing_is_400_closed_and_never_forwarded(tmp_path, case):
    async with recorded_stack(tmp_path, weight=50) as (s, rec):
        ex = await exchange(s.port, FRAMING_400[case], timeout=5)
        await assert_refused(rec, ex, STATUS.get(case, 400))


async def test_an_lf_only_request_is_answered_400_promptly_not_left_hanging(tmp_path):
    async with recorded_stack(tmp_path) as (s, rec):
        ex = await exchange(s.port, b"GET /v1/models HTTP/1.1\nHost: x\n\n", timeout=2)
        assert ex.elapsed_s < 2 and ex.closed, f"no answer within 2 s (got {ex.data[:100]!r})"
        await assert_refused(rec, ex, 400)


@pytest.mark.parametrize("version", [b"HTTP/2.0", b"HTTP/3.0", b"HTTP/1.2", b"HTTP/0.9"])
async def test_http_versions_other_than_1_0_and_1_1_get_505(tmp_path, version):
    async with recorded_stack(tmp_path) as (s, rec):
        ex = await exchange(s.port, b"GET /v1/models " + version + b"\r\nHost: x\r\n\r\n")
        await assert_refused(rec, ex, 505)


async def test_an_http_0_9_style_request_without_a_version_gets_400_or_505(tmp_path):
    async with recorded_stack(tmp_path) as (s, rec):
        ex = await exchange(s.port, b"GET /v1/models\r\n\r\n", timeout=3)
        await assert_refused(rec, ex, (400, 505))


def big_head(size: int) -> bytes:
    """A chat request whose head (one long header) is `size` bytes."""
    plain = req(b"X-Pad: ")
    pad = size - len(plain) + len(B)
    return req(b"X-Pad: " + b"a" * pad)


@pytest.mark.parametrize("writes", [1, 10], ids=["one_write", "many_writes"])
async def test_a_head_over_max_head_bytes_gets_431(tmp_path, writes):
    raw = big_head(40 << 10)  # over the default max_head_bytes of 32 KiB, under the old 64 KiB cut
    step = -(-len(raw) // writes)
    parts = [raw[i : i + step] for i in range(0, len(raw), step)]
    async with recorded_stack(tmp_path) as (s, rec):
        ex = await exchange(s.port, parts, gap_s=0.02)
        await assert_refused(rec, ex, 431)


async def test_an_unterminated_head_past_max_head_bytes_gets_431_at_once(tmp_path):
    """36 KiB of one header line and no end of head: the gateway answers 431 without waiting for more."""
    async with recorded_stack(tmp_path) as (s, rec):
        reader, writer = await connect(s.port)
        writer.write(START + b"\r\nHost: x\r\nX-Long: " + b"a" * (36 << 10))
        await writer.drain()
        data, closed = await read_all(reader, 2.0)
        writer.close()
        await assert_refused(rec, Exchange(data, closed, 0.0), 431)


async def test_a_header_line_growing_without_end_is_cut_off_with_431_not_buffered(tmp_path):
    """4 KiB writes of one endless header line: 431 soon after the limit, then the connection is closed (the
    client cannot make the gateway buffer a MiB)."""
    async with recorded_stack(tmp_path) as (s, rec):
        reader, writer = await connect(s.port)
        got = bytearray()
        sent = 0
        sent_at_answer: int | None = None

        async def read() -> None:
            nonlocal sent_at_answer
            while chunk := await reader.read(1 << 16):
                got.extend(chunk)
                if sent_at_answer is None:
                    sent_at_answer = sent

        reading = asyncio.ensure_future(read())
        try:
            writer.write(START + b"\r\nHost: x\r\nX-Endless: ")
            async with asyncio.timeout(15):
                while sent < (1 << 20) and not reading.done():
                    writer.write(b"a" * 4096)
                    await writer.drain()
                    sent += 4096
                    await asyncio.sleep(0.005)  # the scenario: a client that sends its header slowly
                await asyncio.wait_for(reading, 3)
        except (ConnectionError, TimeoutError):
            pass
        finally:
            reading.cancel()
            writer.close()
        assert sent_at_answer is not None, f"no answer after {sent} bytes of one header line"
        assert sent_at_answer <= 256 << 10, f"answered only after {sent_at_answer} bytes"
        assert sent < (1 << 20), "the gateway read a whole MiB of one header line"
        await assert_refused(rec, Exchange(bytes(got), True, 0.0), 431)


async def test_more_than_max_headers_headers_get_431(tmp_path):
    lines = [b"X-H%d: v" % i for i in range(101)]
    async with recorded_stack(tmp_path) as (s, rec):
        ex = await exchange(s.port, req(*lines))
        await assert_refused(rec, ex, 431)


async def test_a_request_with_fifty_headers_is_served(tmp_path):
    lines = [b"X-H%d: v" % i for i in range(50)]
    async with recorded_stack(tmp_path) as (s, rec):
        ex = await exchange(s.port, req(b"Connection: close", *lines))
        assert ex.reply.status == 200 and len(rec.requests) == 1


async def test_a_content_length_over_the_default_max_body_bytes_gets_413_before_the_body_is_sent(tmp_path):
    async with recorded_stack(tmp_path) as (s, rec):
        ex = await exchange(s.port, req(b"Content-Length: %d" % ((64 << 20) + 1), body=b"", length=False))
        await assert_refused(rec, ex, 413)


async def test_a_chunked_body_growing_past_the_default_max_body_bytes_gets_413(tmp_path):
    """1 MiB chunks until the gateway answers: 413 once the body passes 64 MiB, then the connection is closed."""
    async with recorded_stack(tmp_path) as (s, rec):
        reader, writer = await connect(s.port)
        got = bytearray()
        sent = 0

        async def read() -> None:
            with contextlib.suppress(ConnectionError):
                while chunk := await reader.read(1 << 16):
                    got.extend(chunk)

        reading = asyncio.ensure_future(read())
        part = b"%x\r\n" % (1 << 20) + b"a" * (1 << 20) + b"\r\n"
        try:
            async with asyncio.timeout(30):
                writer.write(req(TE, body=b"", length=False))
                while sent < (80 << 20) and not got and not reading.done():
                    writer.write(part)
                    await writer.drain()
                    sent += 1 << 20
                await asyncio.wait({reading}, timeout=3)
        except (ConnectionError, TimeoutError):
            pass
        finally:
            reading.cancel()
            writer.close()
        assert got, f"no answer after {sent >> 20} MiB of chunked body (limit 64 MiB)"
        assert sent <= (64 << 20) + (8 << 20), f"answered only after {sent >> 20} MiB"
        await assert_refused(rec, Exchange(bytes(got), True, 0.0), 413)


@pytest.mark.parametrize("framing", ["content_length", "chunked"])
async def test_a_body_over_a_configured_max_body_bytes_gets_413(tmp_path, framing):
    body = b'{"model": "m", "pad": "' + b"a" * 3000 + b'"}'
    raw = req(body=body) if framing == "content_length" else req(TE, body=chunks(body, size=500), length=False)
    async with recorded_stack(tmp_path, limits={"max_body_bytes": 1024}) as (s, rec):
        ex = await exchange(s.port, raw)
        await assert_refused(rec, ex, 413)


ID_OK = re.compile(r"^[A-Za-z0-9._:-]{1,128}$")


@pytest.mark.parametrize(
    "value",
    [
        "abc def",
        "<script>alert(1)</script>",
        "a" * 129,
        "abc;x=1",
        'ab"c',
        "abc/def",
        "ab%0d%0aSet-Cookie:x",
        "ab\tc",
        "abc,def",
    ],
)
async def test_an_unsafe_x_request_id_is_not_reflected_a_generated_one_is_used(tmp_path, value):
    async with recorded_stack(tmp_path) as (s, _rec):
        ex = await exchange(s.port, req(b"Connection: close", b"X-Request-Id: " + value.encode()))
        r = ex.reply
        assert r.status == 200
        got = r.header("x-request-id")
        assert got is not None and ID_OK.match(got), f"X-Request-Id {got!r}"
        assert got not in value and value not in got, f"reflected: sent {value!r}, got {got!r}"
        rows = request_rows(s)
        assert rows and rows[-1]["request_id"] == got


@pytest.mark.parametrize("value", ["req-1.2:3_x", "a" * 128])
async def test_a_safe_x_request_id_is_reflected_and_ledgered(tmp_path, value):
    async with recorded_stack(tmp_path) as (s, _rec):
        ex = await exchange(s.port, req(b"Connection: close", b"X-Request-Id: " + value.encode()))
        assert ex.reply.status == 200 and ex.reply.header("x-request-id") == value
        assert request_rows(s)[-1]["request_id"] == value


HOP = {
    "connection",
    "keep-alive",
    "proxy-connection",
    "te",
    "trailer",
    "transfer-encoding",
    "upgrade",
    "proxy-authorization",
    "x-secret-hop",
    "x-also-hop",
}


@pytest.mark.parametrize("stream", [False, True], ids=["whole", "streamed"])
async def test_hop_by_hop_headers_and_those_named_in_connection_never_reach_the_upstream(tmp_path, stream):
    body = B.replace(b'"stream":false', b'"stream":true') if stream else B
    raw = req(
        b"Connection: close, X-Secret-Hop",
        b"Connection: x-also-hop",
        b"X-Secret-Hop: 1",
        b"X-Also-Hop: 2",
        b"Keep-Alive: timeout=5",
        b"Proxy-Connection: keep-alive",
        b"TE: trailers",
        b"Trailer: X-Checksum",
        b"Proxy-Authorization: Basic Zm9vOmJhcg==",
        b"X-Tenant-Id: t1",
        b"X-Kept: yes",
        body=body,
    )
    async with recorded_stack(tmp_path, weight=0) as (s, rec):
        ex = await exchange(s.port, raw)
        assert ex.reply.status == 200, ex.data[:300]
        assert len(rec.requests) == 1
        got = rec.requests[0]
        assert not (got.names() & HOP), f"hop-by-hop headers forwarded: {sorted(got.names() & HOP)}"
        assert got.header("x-kept") == "yes" and got.header("x-tenant-id") == "t1"
        assert b"Zm9vOmJhcg" not in bytes(rec.old.raw)
