"""Bounded waits on observable events (a counter, a log line, a file), for tests instead of fixed sleeps."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable


class WaitTimeout(AssertionError):
    """What a test waited for did not happen within its bound (an AssertionError, so pytest reports it plainly)."""


def _until_step(pred: Callable[[], object], deadline: float, timeout: float, what: str) -> object | None:
    """pred's value when truthy; None to poll again; raises once the deadline has passed."""
    last = pred()
    if last:
        return last
    if time.monotonic() >= deadline:
        raise WaitTimeout(f"timed out after {timeout:g} s waiting for {what} (last value: {last!r})")
    return None


def _holds_step(pred: Callable[[], object], deadline: float, duration: float, what: str) -> bool:
    """True once `duration` is over with pred truthy all along; raises as soon as pred is falsy."""
    if not pred():
        raise WaitTimeout(f"{what} did not hold (broken after {duration - (deadline - time.monotonic()):.2f} s)")
    return time.monotonic() >= deadline


def wait_until(pred: Callable[[], object], timeout: float, what: str, poll_s: float = 0.01) -> object:
    """Call `pred` until it returns something truthy (returned), or fail naming `what` after `timeout` seconds.
    For synchronous code: the poll sleeps block the calling thread."""
    deadline = time.monotonic() + timeout
    while (got := _until_step(pred, deadline, timeout, what)) is None:
        time.sleep(poll_s)  # a bounded poll, not a synchronizing sleep
    return got


async def await_until(pred: Callable[[], object], timeout: float, what: str, poll_s: float = 0.01) -> object:
    """wait_until for the event loop: polls `pred` without blocking other tasks."""
    deadline = time.monotonic() + timeout
    while (got := _until_step(pred, deadline, timeout, what)) is None:
        await asyncio.sleep(poll_s)  # a bounded poll, not a synchronizing sleep
    return got


def holds_for(pred: Callable[[], object], duration: float, what: str, poll_s: float = 0.01) -> None:
    """A negative check: `pred` stays truthy for `duration` seconds (it fails at once, naming `what`, when it
    does not). For what must *not* happen, e.g. no request reaching an upstream, where no event marks the end."""
    deadline = time.monotonic() + duration
    while not _holds_step(pred, deadline, duration, what):
        time.sleep(poll_s)  # a bounded poll, not a synchronizing sleep


async def await_holds(pred: Callable[[], object], duration: float, what: str, poll_s: float = 0.01) -> None:
    """holds_for for the event loop."""
    deadline = time.monotonic() + duration
    while not _holds_step(pred, deadline, duration, what):
        await asyncio.sleep(poll_s)  # a bounded poll, not a synchronizing sleep
