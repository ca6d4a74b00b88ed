"""Run the CLI in this process as `switchover` would run (tests.cli): exit code, stdout, stderr, seconds; a case
that hangs is stopped by an alarm and reported as HUNG."""

from __future__ import annotations

import contextlib
import io
import signal
import sys
import time
from collections.abc import Iterator

from switchover.cli.app import invoke

HANG_S = 30.0
HUNG = -1


class Hung(BaseException):
    """Raised by the alarm in a case that runs past HANG_S (a BaseException, so no handler swallows it)."""


def _alarm(*_: object) -> None:
    raise Hung


@contextlib.contextmanager
def _stdin(text: str) -> Iterator[None]:
    saved = sys.stdin
    sys.stdin = io.StringIO(text)
    try:
        yield
    finally:
        sys.stdin = saved


def run_cli(argv: list[str], stdin: str = "") -> tuple[int, str, str, float]:
    """`switchover ARGV` in this process, stdin given, stdout/stderr captured; HUNG after HANG_S."""
    out, err = io.StringIO(), io.StringIO()
    t0 = time.perf_counter()
    previous = signal.signal(signal.SIGALRM, _alarm)
    signal.setitimer(signal.ITIMER_REAL, HANG_S)
    try:
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err), _stdin(stdin):
            code = invoke(argv)
    except Hung:
        code = HUNG
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)
    return code, out.getvalue(), err.getvalue(), time.perf_counter() - t0
