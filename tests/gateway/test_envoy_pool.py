"""The Envoy plane against an engine that closes its connection just after a complete streamed answer, without
`Connection: close` (llama-server at b11434 does: its chunked content provider returns false after sink.done(), which
cpp-httplib reads as a cancelled write and ends the keep-alive loop). A pooled connection reused in that window
fails under the next request (Envoy flag UC, no status) and the retry went to old: a fallback that new never
earned. Each request now gets its own upstream connection, so none is."""

from __future__ import annotations

import asyncio
import json
import threading
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest

from switchover.gateway.ledger import ledger_files
from switchover.subproc import stop
from switchover.testbed.processes import free_port
from switchover.testing import FakeEngine, wait_until
from tests.export.test_envoy import _envoy
from tests.gateway.test_envoy_plane import start_plane

SRC = str(Path(__file__).resolve().parents[2] / "src")
CLOSE_AFTER_S = 0.2  # the window in which the closing connection sits in Envoy's pool
STREAM = (
    b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nTransfer-Encoding: chunked\r\n\r\n"
    b'2c\r\ndata: {"choices":[{"text":"x","index":0}]}\n\n\r\n'
    b"e\r\ndata: [DONE]\n\n\r\n0\r\n\r\n"
)


class Closer(asyncio.Protocol):
    """Answers the first request on a connection with a whole stream, ignores what follows, closes soon after."""

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = transport
        self.answered = False
        self.buf = b""

    def data_received(self, data: bytes) -> None:
        self.buf += data
        if self.answered or b"\r\n\r\n" not in self.buf:
            return
        head, _, body = self.buf.partition(b"\r\n\r\n")
        length = next(
            (int(x.split(b":")[1]) for x in head.split(b"\r\n") if x.lower().startswith(b"content-length")), 0
        )
        if len(body) < length:
            return
        self.answered = True
        self.transport.write(STREAM)  # type: ignore[attr-defined]
        asyncio.get_running_loop().call_later(CLOSE_AFTER_S, self.transport.close)


@pytest.fixture
def closer() -> Iterator[str]:
    loop = asyncio.new_event_loop()
    thread = threading.Thread(target=loop.run_forever, daemon=True)
    thread.start()
    server = asyncio.run_coroutine_threadsafe(loop.create_server(Closer, "127.0.0.1", 0), loop).result(10)
    try:
        yield f"http://127.0.0.1:{server.sockets[0].getsockname()[1]}"
    finally:
        loop.call_soon_threadsafe(server.close)
        loop.call_soon_threadsafe(loop.stop)
        thread.join(5)


def test_an_engine_closing_after_each_stream_causes_no_fallback(closer: str, tmp_path: Path) -> None:
    old = FakeEngine("old", model="old")
    with old.in_thread():
        port = free_port()
        cfg = tmp_path / "switchover.yaml"
        cfg.write_text(f"""\
old: {{url: {old.url}, engine: vllm}}
new: {{url: {closer}, engine: llamacpp}}
gateway:
  data_plane: envoy
  weight: 100
  listen: {{port: {port}}}
  envoy: {{binary: {_envoy()}, admin_port: {free_port()}, concurrency: 1}}
  kill_switch: {{enabled: false}}
  drain_seconds: 1
  run_dir: run
""")
        run_dir = tmp_path / "run"
        proc = start_plane(cfg, run_dir)
        try:
            for i in range(10):  # back to back: each next request comes inside the previous connection's window
                req = urllib.request.Request(
                    f"http://127.0.0.1:{port}/v1/completions",
                    data=json.dumps({"prompt": "hi", "stream": True}).encode(),
                    headers={"Content-Type": "application/json", "x-tenant-id": f"t{i}"},
                )
                with urllib.request.urlopen(req, timeout=10) as resp:
                    assert resp.status == 200 and resp.read().endswith(b"[DONE]\n\n")

            def rows() -> list[dict]:
                return [json.loads(x) for f in ledger_files(run_dir) for x in f.read_text().splitlines() if x]

            wait_until(lambda: len(rows()) >= 10, 10, "the rows")
            outcomes = [(r["outcome"], r["arm"]) for r in rows()]
            assert outcomes == [("ok", "new")] * 10, outcomes
        finally:
            stop(proc)
