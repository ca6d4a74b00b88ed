"""Kill switch: a sliding window over the new arm's outcomes and a latch. Pure: the caller passes the time."""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class KillSwitchSnapshot:
    """State for metrics, logs and the admin endpoint."""

    latched: bool
    samples: int
    bad: int
    ratio: float | None  # None below min_samples
    reason: str | None


class KillSwitch:
    """Trips when bad/total of new-arm requests in the last `window` seconds exceeds `max_ratio` with at
    least `min_samples` requests; then stays latched (hysteresis by latch) until `reset()`."""

    def __init__(self, window: float, min_samples: int, max_ratio: float, enabled: bool = True) -> None:
        self.window = window
        self.min_samples = min_samples
        self.max_ratio = max_ratio
        self.enabled = enabled
        self._events: deque[tuple[float, bool]] = deque()
        self._bad = 0
        self.latched = False
        self.reason: str | None = None

    def configure(self, window: float, min_samples: int, max_ratio: float, enabled: bool = True) -> None:
        """Apply a reloaded config; the window's samples and the latch are kept."""
        self.window, self.min_samples, self.max_ratio, self.enabled = window, min_samples, max_ratio, enabled

    def _expire(self, now: float) -> None:
        horizon = now - self.window
        ev = self._events
        while ev and ev[0][0] <= horizon:
            _, bad = ev.popleft()
            self._bad -= bad

    def record(self, now: float, bad: bool) -> bool:
        """Count one new-arm outcome; returns True when this call trips the latch."""
        self._expire(now)
        self._events.append((now, bad))
        self._bad += bad
        if self.latched or not self.enabled:
            return False
        n = len(self._events)
        if n >= self.min_samples and self._bad / n > self.max_ratio:
            self.latched = True
            self.reason = (f"{self._bad}/{n} new-arm requests failed or fell back in {self.window:g} s "
                           f"(> {self.max_ratio:g})")
            return True
        return False

    def reset(self) -> None:
        """Clear the latch and the window (a human decided to try again)."""
        self.latched = False
        self.reason = None
        self._events.clear()
        self._bad = 0

    def restore(self, latched: bool, reason: str | None) -> None:
        """Re-apply a latch persisted before a restart."""
        self.latched = latched
        self.reason = reason

    def snapshot(self, now: float) -> KillSwitchSnapshot:
        self._expire(now)
        n = len(self._events)
        ratio = self._bad / n if n >= self.min_samples else None
        return KillSwitchSnapshot(self.latched, n, self._bad, ratio, self.reason)
