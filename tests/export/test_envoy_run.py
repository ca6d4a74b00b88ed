"""The Envoy export running for real (loopback, bounded): tenants stick to one arm, a failing new engine
falls back to old, and mirrored copies reach new. Skips locally / fails in CI without the binary."""

from __future__ import annotations

import json
import subprocess
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

from switchover.export.envoy import envoy_config
from switchover.testbed.processes import free_port
from tests.export.test_envoy import _envoy


class Upstream:
    """A stand-in engine that names itself, counts requests, and can be told to fail with 503."""

    def __init__(self, name: str) -> None:
        self.name, self.hits, self.fail = name, 0, False
        outer = self

        class H(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                self.rfile.read(int(self.headers.get("Content-Length", 0)))
                outer.hits += 1
                status = 503 if outer.fail else 200
                body = json.dumps({"engine": outer.name}).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, *args: object) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), H)
        self.port = self.server.server_address[1]
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


@pytest.fixture
def upstreams() -> Iterator[tuple[Upstream, Upstream]]:
    old, new = Upstream("old"), Upstream("new")
    yield old, new
    old.close()
    new.close()


def _post(url: str, tenant: str) -> tuple[int, str]:
    req = urllib.request.Request(
        url, data=b'{"prompt": "hi"}', headers={"x-team": tenant, "Content-Type": "application/json"}
    )
    try:
        with urllib.request.urlopen(req, timeout=10) as resp:
            return resp.status, json.loads(resp.read())["engine"]
    except urllib.error.HTTPError as exc:
        return exc.code, "error"


def test_envoy_export_sticks_tenants_falls_back_and_mirrors(make_migration, upstreams, tmp_path: Path) -> None:
    binary = _envoy()
    old, new = upstreams
    m = make_migration(weight=30, shadow=100, new_engine="vllm")
    m.old.url, m.new.url = f"http://127.0.0.1:{old.port}", f"http://127.0.0.1:{new.port}"
    port, admin = free_port(), free_port()
    cfg = tmp_path / "envoy.yaml"
    cfg.write_text(envoy_config(m, listen_port=port, admin_port=admin).render())
    proc = subprocess.Popen(
        [binary, "-c", str(cfg), "--concurrency", "1", "-l", "error", "--disable-hot-restart"],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        deadline = time.monotonic() + 30
        while True:
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{admin}/ready", timeout=1) as r:
                    if r.status == 200:
                        break
            except OSError:
                pass
            assert time.monotonic() < deadline and proc.poll() is None, "envoy did not become ready"
            time.sleep(0.1)
        url = f"http://127.0.0.1:{port}/v1/completions"
        seen: dict[str, set[str]] = {}
        for rnd in range(3):
            for t in range(40):
                status, engine = _post(url, f"tenant-{t}")
                assert status == 200
                seen.setdefault(f"tenant-{t}", set()).add(engine)
            del rnd
        assert all(len(v) == 1 for v in seen.values()), "a tenant moved between arms"
        on_new = [t for t, v in seen.items() if v == {"new"}]
        assert 2 <= len(on_new) <= 24  # 30 % of 40 tenants, loosely (hash buckets)
        hits_before = new.hits
        _post(url, on_new[0] if on_new else "x")
        time.sleep(0.3)
        assert new.hits >= hits_before + 1  # served by new, or mirrored to it
        old_only = next(t for t, v in seen.items() if v == {"old"})
        mirrored_before = new.hits
        _post(url, old_only)
        time.sleep(0.3)
        assert new.hits == mirrored_before + 1  # shadow 100 %: a copy went to new, the client got old
        new.fail = True
        results = [_post(url, t) for t in on_new]
        assert results and all(r == (200, "old") for r in results)  # new answers 503 → retried on old
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
