"""The rollback drill against a stand-in engine: stop, start, first good response, honest failures."""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import shlex
import signal
import subprocess
import sys
from pathlib import Path
from typing import Any
from unittest.mock import patch

import pytest
from aiohttp import web

from switchover.drill import redact, run_drill
from switchover.errors import BadInput
from switchover.testbed.processes import free_port
from switchover.warmup import WarmupSettings
from switchover.wire.readiness import Readiness, check_ready

FAKE = f"{sys.executable} -m switchover.testing zero"  # the shared fake engine, as a process


def _kill(pid: int | None) -> None:
    if pid:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(pid, signal.SIGKILL)


async def test_drill_times_a_foreground_start_until_the_first_good_response(tmp_path: Path) -> None:
    """The drill polls through answers that are not ready and stops at the first good one, timed from the start
    command. The engine may listen only once the drill has seen it not ready (its start command waits for a gate
    that the first failed check opens), so on no box, fast or loaded, can the first check be the good one."""
    port = free_port()
    gate = tmp_path / "gate"
    states: list[str] = []

    async def observed(*args: Any, **kwargs: Any) -> Readiness:
        r = await check_ready(*args, **kwargs)
        states.append(r.state.value)
        if not r.ready:
            gate.touch()
        return r

    # the scenario: a stand-in "old engine" process for the drill to stop
    victim = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"], start_new_session=True)
    wait = f"while [ ! -e {shlex.quote(str(gate))} ]; do sleep 0.01; done"
    try:
        with patch("switchover.drill.check_ready", observed):
            res = await run_drill(
                stop_cmd=f"kill {victim.pid}",
                start_cmd=f"{wait}; exec {FAKE} --port {port} --load-s 0.5",
                url=f"http://127.0.0.1:{port}",
                ready_timeout_s=30,
                poll_s=0.1,
                log=tmp_path / "start.log",
                max_recovery_s=60,
            )
    finally:
        victim.kill()
    try:
        assert res.ok, res.reason
        assert res.stop_exit_code == 0 and res.stop_s is not None
        assert res.start_s is None and res.foreground_pid  # the server itself keeps running
        assert res.ready_after_start_s is not None and res.ready_after_start_s >= 0.5  # it slept 0.5 s first
        assert res.recovery_s is not None and res.recovery_s >= res.ready_after_start_s
        assert res.within_budget is True
        # polled on through "refused" while nothing listened, and stopped at the first good answer
        assert res.checks == len(states) >= 2, states
        assert states[0] == "refused" and states[-1] == "ready" and "ready" not in states[:-1], states
    finally:
        _kill(res.foreground_pid)


async def test_a_failing_start_command_is_reported_not_waited_out() -> None:
    res = await run_drill(
        stop_cmd="true", start_cmd="exit 7", url=f"http://127.0.0.1:{free_port()}", ready_timeout_s=30, poll_s=0.05
    )
    assert not res.ok and res.start_exit_code == 7 and "exited with 7" in res.reason


async def test_nothing_answering_in_time_fails_with_the_last_state() -> None:
    res = await run_drill(
        stop_cmd="true", start_cmd="true", url=f"http://127.0.0.1:{free_port()}", ready_timeout_s=0.5, poll_s=0.05
    )
    assert not res.ok and res.last_state == "refused" and res.recovery_s is None


async def test_bad_arguments_are_bad_input() -> None:
    with pytest.raises(BadInput, match="--url"):
        await run_drill(stop_cmd="true", start_cmd="true", url="127.0.0.1:1")
    with pytest.raises(BadInput, match="--stop-new"):
        await run_drill(stop_cmd=" ", start_cmd="true", url="http://127.0.0.1:1")


async def test_a_log_that_cannot_be_written_is_refused_before_new_is_stopped(tmp_path: Path) -> None:
    stopped = tmp_path / "stopped"
    with pytest.raises(BadInput, match="drill log"):
        await run_drill(
            stop_cmd=f"touch {stopped}",
            start_cmd="true",
            url="http://127.0.0.1:1",
            log=tmp_path / "no-such-folder" / "start.log",
        )
    assert not stopped.exists()  # nothing was stopped: no outage from a bad log path


def test_secrets_in_commands_are_redacted() -> None:
    assert redact("curl -H 'Authorization: Bearer x' --token=abc API_KEY=s3cr3t run") == (
        "curl -H 'Authorization: Bearer ***' --token=*** API_KEY=*** run"
    )


def test_cli_writes_the_figure_to_a_run_directory(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    import orjson

    from switchover.cli.app import main

    argv = [
        "switchover",
        "drill",
        "--stop-new",
        "true",
        "--start-old",
        "exit 3",
        "--url",
        f"http://127.0.0.1:{free_port()}",
        "--runs",
        str(tmp_path),
        "--timeout",
        "5",
    ]
    with patch.object(sys, "argv", argv), pytest.raises(SystemExit) as exc:
        main()
    assert exc.value.code == 1 and "failed" in capsys.readouterr().out
    [run] = list(tmp_path.glob("*-drill"))
    saved = orjson.loads((run / "drill.json").read_bytes())
    assert saved["ok"] is False and saved["start_exit_code"] == 3


async def test_a_server_that_never_answers_cannot_hold_the_drill_past_its_deadline() -> None:
    """One readiness check against it waited 4 x max_ms + 1 s (21 s) whatever ready_timeout_s said."""
    import socket
    import time

    srv = socket.create_server(("127.0.0.1", 0))  # accepts (the kernel's backlog), never answers
    try:
        t0 = time.monotonic()
        res = await run_drill(
            stop_cmd="true",
            start_cmd="true",
            url=f"http://127.0.0.1:{srv.getsockname()[1]}",
            ready_timeout_s=1.0,
            max_ms=5000,
            poll_s=0.05,
        )
        took = time.monotonic() - t0
    finally:
        srv.close()
    assert not res.ok and took < 3, (took, res.reason)
    assert res.last_state == "slow" and "1 s deadline" in (res.last_reason or "")


def _warming_engine(slow_first: int, slow_s: float) -> tuple[web.Application, list[float]]:
    """An engine on loopback whose first `slow_first` completions are slow (caches being built), then fast."""
    sent: list[float] = []

    async def models(_: web.Request) -> web.Response:
        return web.json_response({"data": [{"id": "m"}]})

    async def complete(request: web.Request) -> web.StreamResponse:
        body = await request.json()
        delay = slow_s if len(sent) < slow_first else 0.005
        sent.append(delay)
        await asyncio.sleep(delay)
        choice = {"index": 0, "text": "x", "finish_reason": "length"}
        if not body.get("stream"):
            return web.json_response({"choices": [choice], "usage": {"completion_tokens": 1}})
        resp = web.StreamResponse(headers={"Content-Type": "text/event-stream"})
        await resp.prepare(request)
        await resp.write(b"data: " + json.dumps({"choices": [choice]}).encode() + b"\n\ndata: [DONE]\n\n")
        return resp

    app = web.Application()
    app.router.add_get("/v1/models", models)
    app.router.add_post("/v1/completions", complete)
    return app, sent


async def test_the_drill_measures_the_warm_up_tail_after_the_first_good_response() -> None:
    app, sent = _warming_engine(slow_first=4, slow_s=0.4)
    runner = web.AppRunner(app)
    await runner.setup()
    port = free_port()
    await web.TCPSite(runner, "127.0.0.1", port).start()
    lines: list[str] = []
    try:
        res = await run_drill(
            stop_cmd="true",
            start_cmd="true",
            url=f"http://127.0.0.1:{port}",
            ready_timeout_s=10,
            warmup=WarmupSettings(window=3, max_s=30),
            progress=lines.append,
        )
    finally:
        await runner.cleanup()
    assert res.ok and res.model == "m" and res.warmup is not None and res.warmup.steady, res
    # the readiness check was the first slow answer; three slow probes follow it, then the fast level
    assert res.warmup.tail_requests == 3 and res.warmup.tail_s is not None and res.warmup.tail_s >= 1.2
    assert res.warmup.steady_ttft_ms is not None and res.warmup.steady_ttft_ms < 100
    assert res.warmup.first_ttft_ms is not None and res.warmup.first_ttft_ms >= 400
    assert res.switch_s == pytest.approx(res.recovery_s + res.warmup.tail_s, abs=0.002)
    assert len(sent) == res.warmup.probes + 1  # the one readiness completion, then the probes
    assert any(line.startswith("warm-up:") for line in lines)  # progress while it probed (over 1 s)


async def test_a_warm_up_that_never_settles_gives_no_switch_time() -> None:
    app, _ = _warming_engine(slow_first=10_000, slow_s=0.05)  # every answer the same: settles at once
    runner = web.AppRunner(app)
    await runner.setup()
    port = free_port()
    await web.TCPSite(runner, "127.0.0.1", port).start()
    try:
        settles = await run_drill(
            stop_cmd="true",
            start_cmd="true",
            url=f"http://127.0.0.1:{port}",
            ready_timeout_s=10,
            warmup=WarmupSettings(window=3, max_s=30),
        )
        capped = await run_drill(
            stop_cmd="true",
            start_cmd="true",
            url=f"http://127.0.0.1:{port}",
            ready_timeout_s=10,
            warmup=WarmupSettings(window=3, max_s=0.2),
        )
    finally:
        await runner.cleanup()
    assert settles.warmup is not None and settles.warmup.steady and settles.warmup.tail_requests == 0
    assert capped.ok and capped.warmup is not None and not capped.warmup.steady
    assert capped.switch_s is None and capped.recovery_s is not None  # recovery stands; no guessed switch time
