"""The gates' Prometheus client against hostile servers on 127.0.0.1: a whole-query deadline (not per read),
bounded error bodies, no redirect to another host, no terminal escapes in what it says. Each test is bounded
to a few seconds."""

from __future__ import annotations

import contextlib
import shutil
import socket
import ssl
import subprocess
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import orjson
import pytest

from switchover.config.rollout import PrometheusSource
from switchover.errors import BadInput, Unreachable
from switchover.rollout.custom_gates import promql_vector

Script = Callable[[socket.socket], None]
OK = orjson.dumps(
    {"status": "success", "data": {"resultType": "vector", "result": [{"metric": {"arm": "new"}, "value": [1.0, "3"]}]}}
)


def _drain(conn: socket.socket) -> bytes:
    conn.settimeout(2)
    head = b""
    while b"\r\n\r\n" not in head:
        piece = conn.recv(4096)
        if not piece:
            break
        head += piece
    return head


class _Server:
    """A loopback TCP server that answers each connection with `script` (one thread per connection)."""

    def __init__(self, script: Script, drain: bool = True) -> None:
        self.script, self.drain = script, drain
        self.requests: list[bytes] = []
        self.sock = socket.create_server(("127.0.0.1", 0))
        self.port = self.sock.getsockname()[1]
        self.url = f"http://127.0.0.1:{self.port}"
        self.stop = threading.Event()
        threading.Thread(target=self._serve, daemon=True).start()

    def _serve(self) -> None:
        self.sock.settimeout(0.2)
        while not self.stop.is_set():
            try:
                conn, _ = self.sock.accept()
            except OSError:
                continue
            threading.Thread(target=self._one, args=(conn,), daemon=True).start()

    def _one(self, conn: socket.socket) -> None:
        with conn:
            if self.drain:  # read the request head first (a TLS script reads its own)
                self.requests.append(_drain(conn))
            with contextlib.suppress(OSError):  # the client gave up: what these tests want
                self.script(conn)


@pytest.fixture
def serve() -> Iterator[Callable[..., _Server]]:
    servers: list[_Server] = []

    def start(script: Script, drain: bool = True) -> _Server:
        servers.append(_Server(script, drain))
        return servers[-1]

    yield start
    for s in servers:
        s.stop.set()
        s.sock.close()


def _dribble(data: bytes, every_s: float = 0.1) -> Script:
    def script(conn: socket.socket) -> None:
        for i in range(len(data)):
            conn.sendall(data[i : i + 1])
            time.sleep(every_s)

    return script


def _answer(status: str, body: bytes, extra: str = "") -> bytes:
    return (
        f"HTTP/1.1 {status}\r\nContent-Type: application/json\r\nContent-Length: {len(body)}\r\n{extra}"
        "Connection: close\r\n\r\n"
    ).encode() + body


def test_a_server_sending_a_byte_at_a_time_is_cut_off_at_the_query_timeout(serve: Callable[..., _Server]) -> None:
    """Each byte arrives well within timeout_s, the whole answer does not: the query ends at timeout_s."""
    server = serve(_dribble(_answer("200 OK", OK)))  # ~200 bytes at 10/s: ~20 s
    t0 = time.monotonic()
    with pytest.raises(Unreachable, match=r"within 1 s"):
        promql_vector(PrometheusSource(url=server.url, timeout_s=1), "q")
    assert time.monotonic() - t0 < 2.5


def test_a_server_dribbling_its_headers_is_cut_off_too(serve: Callable[..., _Server]) -> None:
    server = serve(_dribble(b"HTTP/1.1 200 OK\r\n" + b"X-Pad: " + b"a" * 200 + b"\r\n\r\n", 0.05))
    t0 = time.monotonic()
    with pytest.raises(Unreachable, match="within 1 s"):
        promql_vector(PrometheusSource(url=server.url, timeout_s=1), "q")
    assert time.monotonic() - t0 < 2.5


def test_a_server_dribbling_its_body_after_a_prompt_head_is_cut_off_too(serve: Callable[..., _Server]) -> None:
    """The deadline ends the body read early; that must be the timeout, not a short (non-JSON) answer."""
    head, body = _answer("200 OK", OK).split(b"\r\n\r\n", 1)

    def script(conn: socket.socket) -> None:
        conn.sendall(head + b"\r\n\r\n")
        _dribble(body)(conn)

    server = serve(script)
    t0 = time.monotonic()
    with pytest.raises(Unreachable, match="within 1 s"):
        promql_vector(PrometheusSource(url=server.url, timeout_s=1), "q")
    assert time.monotonic() - t0 < 2.5


def test_a_normal_answer_is_read(serve: Callable[..., _Server]) -> None:
    server = serve(lambda c: c.sendall(_answer("200 OK", OK)))
    assert promql_vector(PrometheusSource(url=server.url, timeout_s=2), "q") == [({"arm": "new"}, 3.0)]


def test_a_huge_error_body_is_read_only_to_its_bound(serve: Callable[..., _Server]) -> None:
    """A 500 announcing 40 MB: the client reads at most 64 KiB of it and says the status."""
    sent = [0]

    def script(conn: socket.socket) -> None:
        conn.sendall(b"HTTP/1.1 500 Internal Server Error\r\nContent-Length: 40000000\r\n\r\n")
        chunk = b"x" * 65536
        for _ in range(610):  # 40 MB if the client kept reading
            conn.sendall(chunk)
            sent[0] += len(chunk)

    server = serve(script)
    with pytest.raises(Unreachable, match="answered 500"):
        promql_vector(PrometheusSource(url=server.url, timeout_s=5), "q")
    time.sleep(0.2)
    assert sent[0] < 16 << 20  # the kernel buffers some; it never reads anywhere near 40 MB


def test_a_redirect_to_another_host_is_not_followed_with_the_query(serve: Callable[..., _Server]) -> None:
    other = serve(lambda c: c.sendall(_answer("200 OK", OK)))
    elsewhere = other.url.replace("127.0.0.1", "localhost")  # same machine, another host name: another origin
    server = serve(lambda c: c.sendall(_answer("302 Found", b"", f"Location: {elsewhere}/api/v1/query?x=1\r\n")))
    with pytest.raises(Unreachable, match=r"redirected .* not followed"):
        promql_vector(PrometheusSource(url=server.url, timeout_s=2), "secret_query")
    time.sleep(0.1)
    assert not other.requests


def test_a_redirect_within_the_same_origin_is_followed(serve: Callable[..., _Server]) -> None:
    answers = iter(
        [_answer("307 Temporary Redirect", b"", "Location: /prom/api/v1/query?query=q\r\n"), _answer("200 OK", OK)]
    )
    server = serve(lambda c: c.sendall(next(answers)))
    assert promql_vector(PrometheusSource(url=server.url, timeout_s=2), "q") == [({"arm": "new"}, 3.0)]
    assert server.requests[1].startswith(b"GET /prom/api/v1/query?query=q ")


@pytest.mark.parametrize("status", ["400 Bad Request", "503 Service Unavailable"])
def test_terminal_escapes_in_an_error_message_never_reach_the_terminal(
    serve: Callable[..., _Server], status: str
) -> None:
    evil = "bad\x1b[2J\x1b]0;pwned\x07\x1b[1A\rGATE PASS\u202e"
    body = orjson.dumps({"status": "error", "error": evil})
    server = serve(lambda c: c.sendall(_answer(status, body)))
    with pytest.raises((BadInput, Unreachable)) as info:
        promql_vector(PrometheusSource(url=server.url, timeout_s=2), "q")
    text = str(info.value)
    assert "bad" in text and "GATE PASS" in text
    assert not any(ch in text for ch in "\x1b\x07\r\u202e")


def test_nothing_listening_is_unreachable_at_once() -> None:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    with pytest.raises(Unreachable, match="unreachable"):
        promql_vector(PrometheusSource(url=f"http://127.0.0.1:{port}", timeout_s=2), "q")


@pytest.fixture
def tls_cert(tmp_path: Path) -> tuple[Path, Path]:
    """A self-signed certificate for 'localhost' (openssl), and its key."""
    if shutil.which("openssl") is None:
        pytest.skip("openssl is not installed")
    cert, key = tmp_path / "cert.pem", tmp_path / "key.pem"
    subprocess.run(
        [
            "openssl",
            "req",
            "-x509",
            "-newkey",
            "rsa:2048",
            "-nodes",
            "-keyout",
            str(key),
            "-out",
            str(cert),
            "-days",
            "1",
            "-subj",
            "/CN=localhost",
            "-addext",
            "subjectAltName=DNS:localhost",
        ],
        check=True,
        capture_output=True,
        timeout=60,
    )
    return cert, key


def test_https_is_read_with_the_certificate_checked(
    serve: Callable[..., _Server], tls_cert: tuple[Path, Path], monkeypatch: pytest.MonkeyPatch
) -> None:
    cert, key = tls_cert
    ctx = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    ctx.load_cert_chain(cert, key)

    def script(conn: socket.socket) -> None:
        with ctx.wrap_socket(conn, server_side=True) as tls:
            tls.recv(65536)
            tls.sendall(_answer("200 OK", OK))

    server = serve(script, False)
    url = f"https://localhost:{server.port}"
    with pytest.raises(Unreachable, match="CERTIFICATE_VERIFY_FAILED"):  # not trusted: refused
        promql_vector(PrometheusSource(url=url, timeout_s=3), "q")
    monkeypatch.setenv("SSL_CERT_FILE", str(cert))  # trusted: read
    assert promql_vector(PrometheusSource(url=url, timeout_s=3), "q") == [({"arm": "new"}, 3.0)]


def test_a_tls_handshake_that_never_completes_ends_at_the_query_timeout(serve: Callable[..., _Server]) -> None:
    # a TLS record header, then its body a byte every 0.2 s: each read is quick, the handshake never ends
    server = serve(_dribble(b"\x16\x03\x01\x00\x40" + b"\x00" * 64, 0.2), False)
    t0 = time.monotonic()
    with pytest.raises(Unreachable, match="within 1 s"):
        promql_vector(PrometheusSource(url=f"https://localhost:{server.port}", timeout_s=1), "q")
    assert time.monotonic() - t0 < 2.5
