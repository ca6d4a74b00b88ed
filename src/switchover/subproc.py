"""Stopping a child process the same way everywhere: SIGTERM, a bounded wait, then SIGKILL.

Used by the bench's calibration server, the benchmark scripts and the tests that start real engines, Envoy or
Prometheus, so that none of them can leave a process behind or hang on one that ignores SIGTERM."""

from __future__ import annotations

import subprocess


def stop(proc: subprocess.Popen, grace_s: float = 10.0) -> int | None:
    """Terminate `proc`, give it `grace_s` seconds to exit, then kill it; its exit status (None: not reaped).

    A process that has already exited is only reaped. Never raises for a process that is gone."""
    if proc.poll() is not None:
        return proc.returncode
    try:
        proc.terminate()
        return proc.wait(timeout=grace_s)
    except ProcessLookupError:
        return proc.poll()
    except subprocess.TimeoutExpired:
        proc.kill()
        try:
            return proc.wait(timeout=grace_s)
        except subprocess.TimeoutExpired:  # unkillable (uninterruptible sleep): do not hang the caller
            return None
