"""`gateway state` / `gateway reset` send the admin token only to the gateway the config names: the address comes
from gateway.listen (the port from gateway.json only when the config asks for any port), the file must belong to
the gateway that holds the run directory's lock, and an answer that is not the gateway's JSON is exit 3, not 70."""

from __future__ import annotations

import os
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import ClassVar

import orjson
import pytest
import yaml

from switchover.errors import Unreachable
from switchover.gateway.state import RunDirLock, admin_url, lock_holder
from tests.gateway.test_cli import cli_here

TOKEN = "tok-" + "x" * 30


class Recorder(BaseHTTPRequestHandler):
    """Any program on a reused port: records every request's admin header, answers 200 with an HTML page."""

    seen: ClassVar[list[str | None]] = []

    def _answer(self) -> None:
        self.seen.append(self.headers.get("X-Switchover-Admin"))
        body = b"<html>not a gateway</html>"
        self.send_response(200)
        self.send_header("Content-Type", "text/html")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    do_GET = do_POST = _answer

    def log_message(self, *args: object) -> None:
        pass


@pytest.fixture
def other_program():
    """A loopback HTTP server that is not the gateway; yields (port, the admin headers it received)."""
    Recorder.seen = []
    server = ThreadingHTTPServer(("127.0.0.1", 0), Recorder)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield server.server_address[1], Recorder.seen
    finally:
        server.shutdown()
        server.server_close()


def setup_run_dir(tmp_path, listen_port: int, file_url: str, pid: int):
    """A config with gateway.listen.port `listen_port`, and a run dir whose gateway.json names `file_url`/`pid`."""
    run_dir = tmp_path / "run"
    run_dir.mkdir()
    (run_dir / "gateway.json").write_bytes(orjson.dumps({"url": file_url, "pid": pid}))
    (run_dir / "admin.token").write_text(TOKEN)
    cfg = tmp_path / "switchover.yaml"
    cfg.write_text(
        yaml.safe_dump(
            {
                "old": {"url": "http://127.0.0.1:9", "engine": "vllm"},
                "new": {"url": "http://127.0.0.1:9", "engine": "vllm"},
                "gateway": {"run_dir": "run", "listen": {"host": "127.0.0.1", "port": listen_port}},
            }
        )
    )
    return run_dir, cfg


@pytest.mark.parametrize(
    ("host", "port", "file_port", "url"),
    [
        ("127.0.0.1", 8080, 8080, "http://127.0.0.1:8080"),
        ("127.0.0.1", 0, 41234, "http://127.0.0.1:41234"),  # any port: the bound one, from the file
        ("0.0.0.0", 8080, 8080, "http://127.0.0.1:8080"),  # a wildcard is reached over loopback
        ("::", 0, 9000, "http://[::1]:9000"),
        ("::1", 8080, 8080, "http://[::1]:8080"),
    ],
)
def test_the_admin_url_is_the_configured_listen_address(host, port, file_port, url):
    assert admin_url(host, port, file_port) == url


def test_an_admin_url_whose_port_differs_from_the_configured_one_is_refused():
    with pytest.raises(Unreachable, match=r"gateway\.listen\.port is 8080"):
        admin_url("127.0.0.1", 8080, 8081)
    with pytest.raises(Unreachable, match="no port"):
        admin_url("127.0.0.1", 0, None)


@pytest.mark.parametrize("verb", ["state", "reset"])
def test_a_gateway_file_naming_another_port_gets_no_token_and_exits_3(
    tmp_path, capsys, monkeypatch, other_program, verb
):
    port, seen = other_program
    run_dir, cfg = setup_run_dir(
        tmp_path, port + 1 if port < 65535 else port - 1, f"http://127.0.0.1:{port}", os.getpid()
    )
    lock = RunDirLock(run_dir)
    lock.acquire()  # a live gateway holds the run dir; only the file's port is wrong
    try:
        code, err = cli_here(["gateway", verb, "--config", str(cfg)], capsys, monkeypatch)
    finally:
        lock.release()
    assert code == 3, err
    assert "gateway.listen.port" in err and "Traceback" not in err
    assert seen == [], "the admin token went to the port gateway.json named"


def test_a_stale_gateway_file_after_a_crash_gets_no_token_and_exits_3(tmp_path, capsys, monkeypatch, other_program):
    port, seen = other_program
    run_dir, cfg = setup_run_dir(tmp_path, 0, f"http://127.0.0.1:{port}", 2**22 + 7)
    (run_dir / "gateway.lock").write_text(str(2**22 + 7))  # no process holds it: the gateway died
    code, err = cli_here(["gateway", "state", "--config", str(cfg)], capsys, monkeypatch)
    assert code == 3, err
    assert "no running gateway" in err and "stale" in err
    assert seen == [], "the admin token went to whatever listens on the stale file's port"


def test_a_gateway_file_of_another_process_than_the_lock_holder_gets_no_token(
    tmp_path, capsys, monkeypatch, other_program
):
    port, seen = other_program
    run_dir, cfg = setup_run_dir(tmp_path, 0, f"http://127.0.0.1:{port}", 1)
    lock = RunDirLock(run_dir)
    lock.acquire()
    try:
        code, err = cli_here(["gateway", "state", "--config", str(cfg)], capsys, monkeypatch)
    finally:
        lock.release()
    assert code == 3 and f"pid {os.getpid()}" in err, err
    assert seen == []


def test_an_answer_that_is_not_the_gateways_json_exits_3_with_a_clear_message(
    tmp_path, capsys, monkeypatch, other_program
):
    port, seen = other_program
    run_dir, cfg = setup_run_dir(tmp_path, port, f"http://127.0.0.1:{port}", os.getpid())
    lock = RunDirLock(run_dir)
    lock.acquire()
    try:
        code, err = cli_here(["gateway", "state", "--config", str(cfg)], capsys, monkeypatch)
    finally:
        lock.release()
    assert code == 3, err
    assert "not the gateway's JSON" in err and "Traceback" not in err
    assert seen == [TOKEN], "the configured address of a live gateway was not called"


def test_the_lock_holder_is_the_process_holding_the_lock_and_none_once_released(tmp_path):
    run_dir = tmp_path / "run"
    run_dir.mkdir()
    assert lock_holder(run_dir) is None
    lock = RunDirLock(run_dir)
    lock.acquire()
    try:
        assert lock_holder(run_dir) == os.getpid()
    finally:
        lock.release()
    assert lock_holder(run_dir) is None
