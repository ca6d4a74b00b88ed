"""The rollback drill against a stand-in engine: stop, start, first good response, honest failures."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
from pathlib import Path
from unittest.mock import patch

import pytest

from switchover.drill import redact, run_drill
from switchover.errors import BadInput
from switchover.testbed.processes import free_port

FAKE = f"{sys.executable} -m switchover.testing zero"  # the shared fake engine, as a process


def _kill(pid: int | None) -> None:
    if pid:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(pid, signal.SIGKILL)


async def test_drill_times_a_foreground_start_until_the_first_good_response(tmp_path: Path) -> None:
    port = free_port()
    # the scenario: a stand-in "old engine" process for the drill to stop
    victim = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"], start_new_session=True)
    try:
        res = await run_drill(
            stop_cmd=f"kill {victim.pid}",
            start_cmd=f"{FAKE} --port {port} --load-s 0.5",
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
        assert res.checks >= 2 and res.within_budget is True
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
        await run_drill(stop_cmd=f"touch {stopped}", start_cmd="true", url="http://127.0.0.1:1",
                        log=tmp_path / "no-such-folder" / "start.log")
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
        res = await run_drill(stop_cmd="true", start_cmd="true", url=f"http://127.0.0.1:{srv.getsockname()[1]}",
                              ready_timeout_s=1.0, max_ms=5000, poll_s=0.05)
        took = time.monotonic() - t0
    finally:
        srv.close()
    assert not res.ok and took < 3, (took, res.reason)
    assert res.last_state == "slow" and "1 s deadline" in (res.last_reason or "")
