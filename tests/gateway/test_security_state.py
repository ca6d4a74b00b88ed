"""State the gateway keeps across restarts and shutdowns: a drain cut-off ends a stream honestly and is ledgered
as such; a second gateway that cannot bind leaves the first one's files alone; a kill-switch file that cannot be
read fails safe (latched, with an error naming it)."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import signal
import sys
import time

import orjson
import pytest
import yaml

from switchover.testing import await_until
from switchover.wire.sse import parse_all
from tests.gateway.conftest import chat, connect, exchange, http_request, parse_replies, read_all, request_rows, stack
from tests.gateway.test_cli import wait_file

CLI = [sys.executable, "-m", "switchover"]


async def cli(*args: str, timeout: float = 60) -> tuple[int, str, str]:
    """Run the CLI without blocking this event loop (an in-process gateway may be serving on it)."""
    proc = await asyncio.create_subprocess_exec(
        *CLI, *args, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE
    )
    try:
        out, err = await asyncio.wait_for(proc.communicate(), timeout)
    except TimeoutError:
        proc.kill()
        await proc.wait()
        raise AssertionError(f"`switchover {' '.join(args)}` still running after {timeout} s") from None
    assert proc.returncode is not None
    return proc.returncode, out.decode(errors="replace"), err.decode(errors="replace")


async def test_a_drain_cutoff_ends_the_stream_with_an_error_event_and_a_drain_cutoff_row(tmp_path):
    """Assumed API: `await gateway.drain(seconds)` stops admitting, waits up to `seconds`, then cuts what runs."""
    async with stack(tmp_path, weight=100) as s:
        reader, writer = await connect(s.port)
        body = orjson.dumps(chat(stream=True, max_tokens=100))
        writer.write(http_request(body=body, headers=[("X-Tenant-Id", "t1"), ("X-Fault", "drip:200")]))
        await writer.drain()
        got = bytearray()
        async with asyncio.timeout(5):
            while b"data: " not in got:
                chunk = await reader.read(1 << 16)
                assert chunk, "closed before the first event"
                got += chunk
        t0 = time.perf_counter()
        await s.gw.drain(0.5)
        rest, closed = await read_all(reader, 5)
        writer.close()
        got += rest
        assert closed, f"the stream was still running 5 s after a 0.5 s drain ({time.perf_counter() - t0:.1f} s)"
        replies = parse_replies(bytes(got))
        assert replies and replies[0].status == 200
        events = parse_all([replies[0].body])
        assert events[-1].data == b"[DONE]", events[-3:]
        last = orjson.loads(events[-2].data)
        assert isinstance(last, dict) and "error" in last, events[-2].data
        rows = await await_until(lambda: request_rows(s), 2.5, "the request's ledger row")
        assert [r["outcome"] for r in rows] == ["drain_cutoff"], rows
        assert rows[0]["status"] != 499


async def test_a_second_gateway_on_a_busy_port_exits_2_and_leaves_the_first_ones_files_alone(tmp_path):
    async with stack(tmp_path, weight=0) as s:
        run_dir = s.gw.run_dir
        before = {p.name: p.read_bytes() for p in run_dir.iterdir() if p.is_file() and not p.name.startswith("ledger")}
        assert "admin.token" in before
        second = {**s.config, "gateway": {**s.config["gateway"], "listen": {"host": "127.0.0.1", "port": s.port}}}
        cfg = tmp_path / "second.yaml"
        cfg.write_text(yaml.safe_dump(second))
        code, out, err = await cli("gateway", "--config", str(cfg))
        assert code == 2, f"exit {code}: {err[-500:]}"
        assert "Traceback" not in out + err
        after = {p.name: p.read_bytes() for p in run_dir.iterdir() if p.is_file() and not p.name.startswith("ledger")}
        changed = sorted(n for n in set(before) | set(after) if n != "gateway.log" and before.get(n) != after.get(n))
        assert not changed, f"the failed second gateway changed {changed}"
        token = before["admin.token"].decode()
        state = await exchange(s.port, http_request("GET", "/admin/state", headers=[("X-Switchover-Admin", token)]))
        assert state.reply.status == 200, "the first gateway's admin token no longer works"


UNREADABLE = {
    "torn": b'{"latched": tr',
    "list": b"[true]",
    "empty": b"",
    "null": b"null",
    "binary": b"\x00\x9f\xff",
    "latched_is_a_string": b'{"latched": "no"}',
}


@pytest.mark.parametrize("case", list(UNREADABLE))
async def test_an_unreadable_killswitch_file_starts_the_gateway_latched_and_logs_an_error_naming_it(
    tmp_path, caplog, case
):
    caplog.set_level(logging.INFO)
    run_dir = tmp_path / "run"
    run_dir.mkdir()
    (run_dir / "killswitch.json").write_bytes(UNREADABLE[case])
    async with stack(tmp_path, weight=100) as s:
        assert s.gw.killswitch.latched, "started unlatched from an unreadable kill-switch file"
        ex = await exchange(s.port, http_request(body=orjson.dumps(chat()), headers=[("X-Tenant-Id", "t1")]))
        assert ex.reply.status == 200
        assert (s.old.stats.requests, s.new.stats.requests) == (1, 0), "weight 100 went to new while latched"
        token = (s.gw.run_dir / "admin.token").read_text()
        state = await exchange(s.port, http_request("GET", "/admin/state", headers=[("X-Switchover-Admin", token)]))
        ks = orjson.loads(state.reply.body)["kill_switch"]
        assert ks["latched"] is True
        assert ks["max_client_share"] == s.gw.live.gw.kill_switch.max_client_share and ks["held"] is False
    named = [r for r in caplog.records if r.levelno >= logging.ERROR and "killswitch.json" in r.getMessage()]
    assert named, [r.getMessage() for r in caplog.records if r.levelno >= logging.WARNING]


@pytest.mark.parametrize(
    ("content", "latched"),
    [
        (b'{"latched": false}', False),
        (b'{"latched": false, "reason": null, "ts": 1.0}', False),
        (b'{"latched": true, "reason": "tripped before", "ts": 1.0}', True),
    ],
)
async def test_a_valid_killswitch_file_is_restored_as_written(tmp_path, caplog, content, latched):
    caplog.set_level(logging.INFO)
    run_dir = tmp_path / "run"
    run_dir.mkdir()
    (run_dir / "killswitch.json").write_bytes(content)
    async with stack(tmp_path, weight=100) as s:
        assert s.gw.killswitch.latched is latched
        ex = await exchange(s.port, http_request(body=orjson.dumps(chat()), headers=[("X-Tenant-Id", "t1")]))
        assert ex.reply.status == 200
        assert s.new.stats.requests == (0 if latched else 1)
    assert not [r for r in caplog.records if r.levelno >= logging.ERROR and r.name.startswith("switchover")]


@pytest.mark.timeout(120)
async def test_a_gateway_process_with_a_torn_killswitch_file_starts_latched_and_says_so(tmp_path):
    run_dir = tmp_path / "run"
    run_dir.mkdir()
    (run_dir / "killswitch.json").write_bytes(b'{"latched": tr')
    cfg = tmp_path / "switchover.yaml"
    cfg.write_text(
        yaml.safe_dump(
            {
                "old": {"url": "http://127.0.0.1:9", "engine": "vllm"},
                "new": {"url": "http://127.0.0.1:9", "engine": "vllm"},
                "gateway": {"weight": 100, "run_dir": "run", "listen": {"port": 0}},
            }
        )
    )
    log = tmp_path / "stderr.log"
    with log.open("wb") as fh:
        proc = await asyncio.create_subprocess_exec(*CLI, "gateway", "--config", str(cfg), stdout=fh, stderr=fh)
    try:
        await wait_file(run_dir / "gateway.json", 60)
        code, out, err = await cli("gateway", "state", "--config", str(cfg), "--json")
        assert code == 0, err[-500:]
        assert orjson.loads(out)["kill_switch"]["latched"] is True
    finally:
        if proc.returncode is None:
            with contextlib.suppress(ProcessLookupError):
                proc.send_signal(signal.SIGTERM)
            try:
                await asyncio.wait_for(proc.wait(), 20)
            except TimeoutError:
                proc.kill()
                await proc.wait()
    text = log.read_text(errors="replace")
    with contextlib.suppress(OSError):
        text += (run_dir / "gateway.log").read_text(errors="replace")
    assert any("ERROR" in line and "killswitch.json" in line for line in text.splitlines()), text[-2000:]
    assert "Traceback" not in text
    assert os.path.exists(run_dir / "killswitch.json")
