"""Kill switch: a sliding window over the new arm's outcomes and a latch. Pure: the caller passes the time.

One client cannot move it alone: with `client_share` below 1, each known client's failures, and its requests, count
for at most that share of the window's counted failures and requests (`capped_total`), so one client's slow or
failing requests cannot latch it for everyone, and its cheap successes cannot dilute the others' failures.
Requests of no known client (passthrough, open, a single key) are counted whole.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable
from dataclasses import dataclass


def capped_total(counts: list[int], free: int, share: float) -> float:
    """Σ min(count, T) + free for the largest cap T with T <= share × that sum: no client counts for more than
    `share` of the total; `free` is mass of no client, never capped. share >= 1: the plain sum."""
    total = sum(counts) + free
    if share >= 1 or not counts:
        return float(total)
    xs = sorted(counts, reverse=True)
    xs.append(0)
    rest = total
    # h(T) = share × g(T) − T is concave with h(0) >= 0: its largest root is found walking the segments down
    # from the top, where the j largest counts are capped (rest: the sum of the others)
    for j in range(len(xs)):
        if j:
            rest -= xs[j - 1]
        if share * j >= 1:
            continue  # h increases on this segment: its root lies lower
        cap = share * rest / (1 - share * j)
        if cap >= xs[j] and (j == 0 or cap <= xs[j - 1]):
            return j * cap + rest
    return float(free)


@dataclass(frozen=True, slots=True)
class KillSwitchSnapshot:
    """State for metrics, logs and the admin endpoint (samples and bad: raw; the ratio from the counted ones)."""

    latched: bool
    samples: int
    bad: int
    ratio: float | None  # None below min_samples (counted)
    reason: str | None
    counted_samples: float | None = None  # with each client's share capped; None when share is 1
    counted_bad: float | None = None
    held: bool = False  # the raw window would trip it, the capped one does not: one client's doing (say so)


class KillSwitch:
    """Trips when bad/total of new-arm requests in the last `window` seconds exceeds `max_ratio` with at
    least `min_samples` requests (both counted with each client's share capped at `client_share`); then stays
    latched (hysteresis by latch) until `reset()`."""

    def __init__(
        self, window: float, min_samples: int, max_ratio: float, enabled: bool = True, client_share: float = 1.0
    ) -> None:
        self.window = window
        self.min_samples = min_samples
        self.max_ratio = max_ratio
        self.enabled = enabled
        self.client_share = client_share
        self._events: deque[tuple[float, bool, str | None]] = deque()
        self._bad = 0
        self._per_client: dict[str, list[int]] = {}  # client -> [requests, bad] in the window
        self._free = [0, 0]  # requests, bad of no known client
        self.latched = False
        self.reason: str | None = None

    def configure(
        self, window: float, min_samples: int, max_ratio: float, enabled: bool = True, client_share: float = 1.0
    ) -> None:
        """Apply a reloaded config; the window's samples and the latch are kept."""
        self.window, self.min_samples, self.max_ratio, self.enabled = window, min_samples, max_ratio, enabled
        self.client_share = client_share

    def _expire(self, now: float) -> None:
        horizon = now - self.window
        ev = self._events
        while ev and ev[0][0] <= horizon:
            _, bad, client = ev.popleft()
            self._bad -= bad
            tally = self._free if client is None else self._per_client[client]
            tally[0] -= 1
            tally[1] -= bad
            if client is not None and not tally[0]:
                del self._per_client[client]

    def _counted(self) -> tuple[float, float]:
        """(requests, bad) in the window, each client's share capped."""
        share = self.client_share
        if share >= 1 or not self._per_client:
            return float(len(self._events)), float(self._bad)
        tallies = self._per_client.values()
        n = capped_total([t[0] for t in tallies], self._free[0], share)
        bad = capped_total([t[1] for t in tallies if t[1]], self._free[1], share)
        return n, min(bad, n)

    def record(self, now: float, bad: bool, client: str | None = None) -> bool:
        """Count one new-arm outcome of `client` (None: no known client); True when this call trips the latch."""
        self._expire(now)
        self._events.append((now, bad, client))
        self._bad += bad
        tally = self._free if client is None else self._per_client.setdefault(client, [0, 0])
        tally[0] += 1
        tally[1] += bad
        if self.latched or not self.enabled:
            return False
        n, b = self._counted()
        if n >= self.min_samples and n and b / n > self.max_ratio:
            self.latched = True
            self.reason = (
                f"{b:g}/{n:g} new-arm requests failed or fell back in {self.window:g} s (> {self.max_ratio:g})"
            )
            if self.client_share < 1 and self._per_client:
                self.reason += (
                    f", counted with each client's share capped at {self.client_share:g} "
                    f"({len(self._events)} requests, {self._bad} bad, {len(self._per_client)} clients)"
                )
            return True
        return False

    def reset(self) -> None:
        """Clear the latch and the window (a human decided to try again)."""
        self.latched = False
        self.reason = None
        self._events.clear()
        self._bad = 0
        self._per_client.clear()
        self._free = [0, 0]

    def restore(self, latched: bool, reason: str | None) -> None:
        """Re-apply a latch persisted before a restart."""
        self.latched = latched
        self.reason = reason

    def snapshot(self, now: float) -> KillSwitchSnapshot:
        self._expire(now)
        n, b = self._counted()
        ratio = b / n if n >= self.min_samples and n else None
        capped = self.client_share < 1 and bool(self._per_client)
        raw = len(self._events)
        held = (
            capped
            and not self.latched
            and self.enabled
            and raw >= self.min_samples
            and self._bad / raw > self.max_ratio
            and (ratio is None or ratio <= self.max_ratio)
        )
        return KillSwitchSnapshot(
            self.latched, raw, self._bad, ratio, self.reason, n if capped else None, b if capped else None, held
        )


@dataclass(frozen=True)
class NewArmWatch:
    """The kill switch as the request path sees it: whether it is latched now (a routing input), and where each
    outcome of a request routed to new is recorded (bad or not, and for which client; it may trip the switch)."""

    latched: Callable[[], bool]
    record: Callable[[bool, str | None], None]
