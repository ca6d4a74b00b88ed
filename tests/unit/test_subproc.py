"""switchover.subproc.stop: SIGTERM, bounded wait, SIGKILL; bounded even for a child that ignores SIGTERM."""

from __future__ import annotations

import signal
import subprocess
import sys
import time

from switchover.subproc import stop


def _child(code: str) -> subprocess.Popen:
    proc = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, text=True)
    assert proc.stdout is not None and proc.stdout.readline().strip() == "up"  # the handler is installed
    return proc


def test_a_child_that_exits_on_sigterm_is_stopped_by_it() -> None:
    proc = _child("import time; print('up', flush=True); time.sleep(60)")
    assert stop(proc, grace_s=10) == -signal.SIGTERM


def test_a_child_that_ignores_sigterm_is_killed_after_the_grace() -> None:
    proc = _child(
        "import signal, time; signal.signal(signal.SIGTERM, signal.SIG_IGN); print('up', flush=True); time.sleep(60)"
    )
    t0 = time.monotonic()
    assert stop(proc, grace_s=0.5) == -signal.SIGKILL
    assert time.monotonic() - t0 < 10  # bounded by the grace, not by the child's 60 s


def test_an_exited_child_is_only_reaped() -> None:
    proc = subprocess.Popen([sys.executable, "-c", "raise SystemExit(3)"])
    proc.wait(timeout=10)
    assert stop(proc) == 3
    assert stop(proc) == 3  # twice is harmless
