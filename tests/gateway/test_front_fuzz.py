"""Fuzzing the gateway's front with raw bytes: 5,000 generated requests per run (random bytes, and valid requests
mutated byte by byte: CR, LF, NUL, spaces and non-ASCII injected, headers duplicated, targets and chunk framing
randomised, cut short), each on its own connection to one gateway. No case may hang, every answer is HTTP/1.1
with a status, and at the end nothing was logged as an error, the kill switch is armed, every ledger line parses,
and no upstream ever saw a path outside `allowed_paths`."""

from __future__ import annotations

import asyncio
import logging
import re
import socket
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import orjson
import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from switchover.ledger_record import LedgerRecord, ShadowRecord
from tests.gateway.conftest import CHAT_BODY, Recorders, Stack, chat, ledger_lines, path_allowed, recorded_stack

EXAMPLES = 5000
READ_BOUND_S = 5.0
ANSWER = re.compile(rb"^HTTP/1\.1 [1-5]\d\d[ \r]")


class Background:
    """A recorded stack serving on its own event loop in a thread, so a plain (sync) test can drive it with
    blocking sockets, one example at a time."""

    def __init__(self, tmp_path: Path, **gateway: Any) -> None:
        self.tmp_path = tmp_path
        self.gateway = gateway
        self.ready = threading.Event()
        self.loop: asyncio.AbstractEventLoop | None = None
        self.stop: asyncio.Event | None = None
        self.stack: Stack | None = None
        self.rec: Recorders | None = None
        self.error: BaseException | None = None
        self.thread = threading.Thread(target=self._run, name="gateway-under-fuzz", daemon=True)

    def _run(self) -> None:
        try:
            asyncio.run(self._main())
        except BaseException as exc:  # surfaced to the test in __enter__ / __exit__
            self.error = exc
        finally:
            self.ready.set()

    async def _main(self) -> None:
        self.loop = asyncio.get_running_loop()
        self.stop = asyncio.Event()
        async with recorded_stack(self.tmp_path, **self.gateway) as (s, rec):
            self.stack, self.rec = s, rec
            self.ready.set()
            await self.stop.wait()

    def __enter__(self) -> Background:
        self.thread.start()
        assert self.ready.wait(30), "the gateway did not start within 30 s"
        if self.error is not None:
            raise self.error
        return self

    def __exit__(self, *exc: object) -> None:
        if self.loop is not None and self.stop is not None:
            self.loop.call_soon_threadsafe(self.stop.set)
        self.thread.join(30)
        assert not self.thread.is_alive(), "the gateway did not stop within 30 s"
        if self.error is not None and exc[0] is None:
            raise self.error

    def call(self, fn: Callable[[], Any]) -> Any:
        """Run `fn` on the gateway's loop and return its result (reads of gateway state are not thread-safe)."""
        assert self.loop is not None
        done = threading.Event()
        box: list[Any] = []

        def run() -> None:
            box.append(fn())
            done.set()

        self.loop.call_soon_threadsafe(run)
        assert done.wait(10)
        return box[0]


def send(port: int, data: bytes, half_close: bool = True) -> bytes:
    """One connection: write, half-close, read until the gateway closes (bounded; a hang fails the case)."""
    deadline = time.monotonic() + READ_BOUND_S
    got = bytearray()
    with socket.create_connection(("127.0.0.1", port), timeout=READ_BOUND_S) as sock:
        try:
            sock.sendall(data)
            if half_close:
                sock.shutdown(socket.SHUT_WR)
        except (BrokenPipeError, ConnectionResetError):
            pass  # the gateway refused and closed before it had everything: what it said is still readable
        while True:
            left = deadline - time.monotonic()
            if left <= 0:
                raise AssertionError(f"no end of answer within {READ_BOUND_S} s: got {bytes(got[:200])!r}")
            sock.settimeout(left)
            try:
                chunk = sock.recv(1 << 16)
            except TimeoutError:
                raise AssertionError(f"hung: no end of answer within {READ_BOUND_S} s: {bytes(got[:200])!r}") from None
            except ConnectionResetError:
                break
            if not chunk:
                break
            got += chunk
    return bytes(got)


# ---- generators --------------------------------------------------------------------------------------------------

METHODS = [
    "GET",
    "POST",
    "POST",
    "POST",
    "HEAD",
    "PUT",
    "DELETE",
    "OPTIONS",
    "PATCH",
    "CONNECT",
    "TRACE",
    "PRI",
    "get",
    "P0ST",
    "GET\x00",
    "",
    "POST POST",
]
SEGMENTS = [
    "v1",
    "v1",
    "chat",
    "completions",
    "models",
    "embeddings",
    "tokenize",
    "detokenize",
    "admin",
    "health",
    "metrics",
    "ready",
    "..",
    ".",
    "%2e%2e",
    "%2E",
    "%2F",
    "%5C",
    "%00",
    "%zz",
    "%",
    "",
    "%63hat",
    "~x",
    "@127.0.0.1:9",
    "127.0.0.1:9",
    "\\",
    "é",
    "a b",
    "x" * 40,
    ";x=1",
    "%0d%0a",
]
TARGETS = [
    "/v1/chat/completions",
    "/v1/completions",
    "/v1/models",
    "/v1/embeddings",
    "/tokenize",
    "/detokenize",
    "/health",
    "/metrics",
    "/ready",
    "/admin/state",
    "/admin/reset",
    "*",
    "http://127.0.0.1:9/v1/models",
    "//127.0.0.1:9/v1/models",
    "127.0.0.1:9",
    "@127.0.0.1:9/v1/chat/completions",
    ":9/x",
    "",
    "/v1/chat/completions?x=1",
    "/v1/%63hat/completions",
    "/v1/../admin",
    "/v1/chat/completions#f",
]
VERSIONS = [
    "HTTP/1.1",
    "HTTP/1.1",
    "HTTP/1.1",
    "HTTP/1.0",
    "HTTP/2.0",
    "HTTP/0.9",
    "HTTP/1.2",
    "http/1.1",
    "HTTP/11",
    "HTTP/1.1 ",
    "",
]
HEADER_NAMES = [
    "Host",
    "Content-Type",
    "X-Tenant-Id",
    "X-Request-Id",
    "Connection",
    "Authorization",
    "Cookie",
    "Expect",
    "Upgrade",
    "Transfer-Encoding",
    "Content-Length",
    "TE",
    "Trailer",
    "Keep-Alive",
    "Proxy-Connection",
    "Proxy-Authorization",
    "X-Switchover-Route",
    "X-Switchover-Admin",
    "Accept-Encoding",
    "X-Forwarded-For",
    "X-Any",
    "X Bad",
    "X(Bad)",
    "",
    "Content-Length ",
    "transfer-encoding",
]
HEADER_VALUES = [
    "",
    "x",
    "127.0.0.1",
    "application/json",
    "close",
    "keep-alive",
    "Upgrade",
    "websocket",
    "100-continue",
    "chunked",
    "gzip, chunked",
    "chunked, chunked",
    "identity",
    "0",
    "5",
    "-1",
    "+5",
    "1_0",
    "5 5",
    "99999999999999999999",
    "Bearer sk-fuzz",
    "new",
    "old",
    "t1",
    "abc\r\nSet-Cookie: x",
    "a\nb",
    "a\rb",
    "a\x00b",
    "é",
    "\t",
    "x" * 200,
]
SPECIALS = [
    b"\r",
    b"\n",
    b"\x00",
    b" ",
    b"\t",
    b"\x80",
    b"\xff",
    b":",
    b"\r\n",
    b"\r\n\r\n",
    b"%",
    b"\x7f",
    b"\\",
    b"/",
    b"0",
    b"\r\n\t",
    b"\xc3\xa9",
]
BODIES = [
    CHAT_BODY,
    orjson.dumps(chat(stream=True)),
    orjson.dumps(chat(stream=True, stream_options={"include_usage": True})),
    b"",
    b"not json",
    b"[1]",
    b'{"model": 5}',
    b'{"stream": "yes"}',
    b'{"stream_options": "x", "stream": true}',
    b'{"model": "client-model", "prompt": "hi", "max_tokens": 2}',
    b'{"input": "hi", "model": "m"}',
    b"{" * 50,
    b'{"messages": [{"role": "user", "content": "\\u0000"}]}',
]


SERVED = [
    "/v1/chat/completions",
    "/v1/completions",
    "/v1/models",
    "/v1/embeddings",
    "/tokenize",
    "/detokenize",
    "/v1/%63hat/completions",
    "/v1/models/client-model",
    "/v1/chat/completions?x=1&y=%2F",
    "/health",
]


@st.composite
def targets(draw: st.DrawFn, served: bool = False) -> str:
    if served:
        return draw(st.sampled_from(SERVED))
    if draw(st.booleans()):
        return draw(st.sampled_from(TARGETS))
    path = "/" + "/".join(draw(st.lists(st.sampled_from(SEGMENTS), max_size=5)))
    if draw(st.integers(0, 3)) == 0:
        path += "?" + draw(st.sampled_from(["a=1", "x=%2F", "q=..", "", "a=%zz", "a b"]))
    return path


@st.composite
def chunked(draw: st.DrawFn, body: bytes) -> bytes:
    """`body` in random chunk sizes; sometimes with extensions, odd sizes, trailers, or a missing end."""
    out = b""
    pos = 0
    while pos < len(body):
        n = draw(st.integers(1, max(1, len(body) - pos)))
        size = draw(
            st.sampled_from(
                [
                    b"%x" % n,
                    b"%X" % n,
                    b"%x;ext=1" % n,
                    b"0%x" % n,
                    b" %x" % n,
                    b"%x " % n,
                    b"0x%x" % n,
                    b"%x" % (n + 1),
                ]
            )
        )
        sep = draw(st.sampled_from([b"\r\n", b"\r\n", b"\r\n", b"\n", b"", b"XX"]))
        out += size + b"\r\n" + body[pos : pos + n] + sep
        pos += n
    out += draw(
        st.sampled_from(
            [b"0\r\n\r\n", b"0\r\n\r\n", b"0\r\nX-Trailer: 1\r\n\r\n", b"0\r\n", b"", b"ffffffffffffffffff\r\n"]
        )
    )
    return out


FRAMING_HEADERS = {
    "Content-Length",
    "Content-Length ",
    "Transfer-Encoding",
    "transfer-encoding",
    "Connection",
    "Expect",
    "Upgrade",
    "Keep-Alive",
    "Proxy-Connection",
}


@st.composite
def requests(draw: st.DrawFn, complete: bool = False) -> bytes:
    """A request built from parts, mostly well-formed. `complete`: framed correctly and `Connection: close`, so the
    gateway has the whole message (and answers and closes) without the client half-closing."""
    method = draw(
        st.sampled_from(["POST", "POST", "POST", "GET", "HEAD", "DELETE", "OPTIONS"] if complete else METHODS)
    )
    version = draw(st.sampled_from(["HTTP/1.1", "HTTP/1.1", "HTTP/1.0"] if complete else VERSIONS))
    lines = [f"{method} {draw(targets(served=complete and draw(st.integers(0, 3)) > 0))} {version}".encode()]
    if complete or draw(st.integers(0, 4)):
        lines.append(b"Host: 127.0.0.1")
    names, values = HEADER_NAMES, HEADER_VALUES
    if complete:  # framed by the test; half of them with only well-formed header fields (so they get proxied)
        names = [n for n in HEADER_NAMES if n not in FRAMING_HEADERS]
        if draw(st.booleans()):
            names = [n for n in names if n and " " not in n and "(" not in n]
            values = [v for v in HEADER_VALUES if not any(c in v for c in "\r\n\x00")]
    headers = draw(st.lists(st.tuples(st.sampled_from(names), st.sampled_from(values)), max_size=6))
    lines += [f"{k}: {v}".encode() for k, v in headers]
    body = draw(st.sampled_from(BODIES))
    framing = draw(
        st.sampled_from(
            ["length", "length", "chunked", "none"]
            if complete
            else ["length", "length", "chunked", "none", "wrong_length"]
        )
    )
    if framing == "length":
        lines.append(b"Content-Length: %d" % len(body))
    elif framing == "wrong_length":
        lines.append(b"Content-Length: %d" % max(0, len(body) + draw(st.integers(-5, 5))))
    elif framing == "chunked":
        lines.append(b"Transfer-Encoding: chunked")
        if complete:
            cut = draw(st.integers(0, len(body)))
            parts = [p for p in (body[:cut], body[cut:]) if p]
            body = b"".join(b"%x\r\n%b\r\n" % (len(p), p) for p in parts) + b"0\r\n\r\n"
        else:
            body = draw(chunked(body))
    else:
        body = b"" if complete or draw(st.booleans()) else body
    if complete or draw(st.integers(0, 3)) == 0:
        lines.append(b"Connection: close")
    return b"\r\n".join(lines) + b"\r\n\r\n" + body


@st.composite
def mutated(draw: st.DrawFn) -> bytes:
    """A request with 1-4 byte-level mutations: insert, delete, replace, duplicate a header line, truncate."""
    data = bytearray(draw(requests()))
    for _ in range(draw(st.integers(1, 4))):
        op = draw(st.sampled_from(["insert", "delete", "replace", "duplicate", "truncate", "special"]))
        pos = draw(st.integers(0, len(data)))
        if op == "insert":
            data[pos:pos] = draw(st.binary(min_size=1, max_size=8))
        elif op == "special":
            data[pos:pos] = draw(st.sampled_from(SPECIALS))
        elif op == "delete":
            del data[pos : pos + draw(st.integers(1, 8))]
        elif op == "replace" and pos < len(data):
            data[pos] = draw(st.sampled_from([*SPECIALS, b"A", b"\xfe"]))[0]
        elif op == "duplicate":
            head_end = data.find(b"\r\n\r\n")
            line_start = data.find(b"\r\n", 0, max(0, head_end))
            if line_start >= 0:
                line_end = data.find(b"\r\n", line_start + 2)
                if 0 <= line_end <= head_end:
                    data[line_end:line_end] = data[line_start:line_end]
        elif op == "truncate":
            del data[pos:]
    return bytes(data)


raw_cases = st.one_of(
    requests(),
    mutated(),
    mutated(),
    st.binary(max_size=400),
    st.lists(st.one_of(requests(), mutated()), min_size=2, max_size=3).map(b"".join),  # pipelined
    st.builds(
        lambda line, rest: line + rest,
        st.sampled_from([b"GET /v1/models HTTP/1.1\r\n", b"POST /v1/chat/completions HTTP/1.1\r\n"]),
        st.binary(max_size=300),
    ),
)


# (bytes, half_close): raw cases are half-closed so an incomplete one ends at once; complete requests are not, so a
# gateway that drops a request whose client half-closed (a valid choice) still forwards these
@st.composite
def cases(draw: st.DrawFn) -> tuple[bytes, bool]:
    if draw(st.integers(0, 2)) == 0:
        return draw(requests(complete=True)), False
    return draw(raw_cases), True


# ---- the test ----------------------------------------------------------------------------------------------------


@pytest.mark.timeout(600)
def test_five_thousand_fuzzed_raw_requests_never_hang_crash_latch_or_reach_a_path_outside_allowed_paths(
    tmp_path, caplog
):
    caplog.set_level(logging.WARNING)
    counts = {"cases": 0, "answered": 0, "empty": 0}
    started = time.perf_counter()
    with Background(
        tmp_path,
        weight=50,
        shadow={"percent": 20},
        kill_switch={"min_samples": 20, "max_fallback_ratio": 0.2},
        limits={"header_timeout_s": 2, "body_timeout_s": 2, "keepalive_timeout_s": 2},
    ) as bg:
        assert bg.stack is not None and bg.rec is not None
        port = bg.stack.port

        @settings(
            max_examples=EXAMPLES,
            deadline=None,
            derandomize=False,
            suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
        )
        @given(cases())
        @example(
            (
                b"POST @127.0.0.1:9/v1/chat/completions HTTP/1.1\r\nHost: x\r\nConnection: close\r\n"
                b"Content-Length: %d\r\n\r\n%b" % (len(CHAT_BODY), CHAT_BODY),
                False,
            )
        )
        @example((b"GET /v1/models HTTP/1.1\nHost: x\n\n", True))
        @example(
            (
                b"POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nContent-Length: 5\r\n"
                b"Transfer-Encoding: chunked\r\n\r\n0\r\n\r\nGET /admin HTTP/1.1\r\nHost: x\r\n\r\n",
                True,
            )
        )
        def one_case(case: tuple[bytes, bool]) -> None:
            data, half_close = case
            counts["cases"] += 1
            answer = send(port, data, half_close)
            if answer:
                counts["answered"] += 1
                assert ANSWER.match(answer), f"not an HTTP/1.1 answer: {answer[:120]!r}"
            else:
                counts["empty"] += 1

        one_case()
        latched = bg.call(lambda: bg.stack.gw.killswitch.latched)
        forwarded = [r.target for r in bg.call(lambda: list(bg.rec.requests))]
    took = time.perf_counter() - started
    print(f"fuzz: {counts} in {took:.1f} s, {len(forwarded)} requests reached an upstream")

    assert counts["cases"] >= EXAMPLES
    assert counts["answered"] > counts["cases"] // 2, counts  # the cases mostly reach the parser and get a word
    assert len(forwarded) >= 50, "almost nothing was proxied: the generator no longer makes valid requests"
    outside = sorted({t for t in forwarded if not path_allowed(t.partition("?")[0])})
    assert not outside, f"upstreams saw paths outside allowed_paths: {outside[:20]}"
    odd = sorted({t for t in forwarded if re.search(r"(^|/)\.\.?(/|$)|%2[eEfF]|%5[cC]|//|\\", t.partition("?")[0])})
    assert not odd, f"upstreams saw unnormalised paths: {odd[:20]}"
    assert not latched, "fuzzed client requests latched the kill switch"
    mine = [r for r in caplog.records if r.name.startswith("switchover")]
    tracebacks = [f"{r.name}: {r.getMessage()}" for r in mine if r.exc_info or r.levelno >= logging.ERROR]
    assert not tracebacks, tracebacks[:10]
    lines = ledger_lines(tmp_path / "run")
    assert lines, "no ledger rows at all"
    for line in lines:
        (ShadowRecord if line.get("kind") == "shadow" else LedgerRecord).model_validate(line)
    for path in (tmp_path / "run").glob("ledger-*.jsonl"):
        text = path.read_bytes()
        assert not text or text.endswith(b"\n"), f"{path.name} ends with a torn line"
