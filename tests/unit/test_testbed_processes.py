"""The test bed knows its own processes: pid plus kernel start time, never just a pid."""

from __future__ import annotations

import os
import signal
import time
from pathlib import Path

from switchover.testbed import processes
from switchover.testbed.processes import EngineProcess, _spawn, _stat, is_ours


def _proc(pid: int, start_ticks: int | None, cmd: list[str]) -> EngineProcess:
    return EngineProcess(role="new", engine="llamacpp", url="http://127.0.0.1:1", port=1, pid=pid, cmdline=cmd,
                         log="l", model="tiny", served_name="m", started_wall=time.time(), start_ticks=start_ticks)


def test_a_started_process_is_ours_until_it_exits(tmp_path: Path) -> None:
    cmd = ["sleep", "30"]
    child = _spawn(cmd, tmp_path / "log", {})
    st = _stat(child.pid)
    assert st is not None
    proc = _proc(child.pid, st[1], cmd)
    assert is_ours(proc)  # immediately after spawn, even before its argv is readable
    os.kill(child.pid, signal.SIGTERM)
    child.wait(timeout=10)
    assert not is_ours(proc)


def test_a_recycled_pid_with_another_start_time_is_not_ours(tmp_path: Path) -> None:
    cmd = ["sleep", "30"]
    child = _spawn(cmd, tmp_path / "log", {})
    try:
        st = _stat(child.pid)
        assert st is not None
        assert not is_ours(_proc(child.pid, st[1] + 1, cmd))
    finally:
        child.kill()
        child.wait(timeout=10)


def test_down_without_state_stops_nothing(tmp_path: Path) -> None:
    assert processes.down(processes.Layout(tmp_path), name="nothing") == []
