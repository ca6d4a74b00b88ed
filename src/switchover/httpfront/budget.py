"""The memory budget every buffer of one server draws from: request bodies, parsed JSON, upstream answers, copies.

One number bounds what untrusted peers can make the process hold, whatever the mix of requests (docs/gateway.md,
Security model, Memory budget). A draw that does not fit is refused, never waited for: the caller answers 503
with Retry-After (the budget is full now) or 413 (one request needs more than the whole budget). A `Hold` is one
request's share, released once when the request ends, so nothing is left drawn by a request that failed.
"""

from __future__ import annotations

KINDS = ("request_body", "parsed_json", "answer", "shadow", "review")


class OverBudget(Exception):
    """A draw that does not fit: `kind` and `size` say what was asked, `whole` that it exceeds the whole budget."""

    def __init__(self, kind: str, size: int, limit: int, free: int) -> None:
        self.kind = kind
        self.size = size
        self.whole = size > limit
        what = kind.replace("_", " ")
        if self.whole:
            msg = f"this request needs {size} bytes of gateway memory for its {what}; the whole budget is {limit}"
        else:
            msg = f"the gateway's memory budget is in use ({free} of {limit} bytes free; {what} needs {size}); retry"
        super().__init__(msg)

    @property
    def status(self) -> int:
        return 413 if self.whole else 503


class MemoryBudget:
    """Bytes drawn, by kind, against one limit; `peak` is the most ever drawn at once."""

    __slots__ = ("by_kind", "limit", "peak", "refused", "used")

    def __init__(self, limit: int) -> None:
        self.limit = limit
        self.used = 0
        self.peak = 0
        self.by_kind: dict[str, int] = dict.fromkeys(KINDS, 0)
        self.refused = 0

    @property
    def free(self) -> int:
        return max(0, self.limit - self.used)

    def take(self, kind: str, n: int) -> bool:
        """Draw `n` bytes of `kind` if they fit; False (nothing drawn) when they do not."""
        if n <= 0:
            return True
        if self.used + n > self.limit:
            self.refused += 1
            return False
        self.used += n
        self.by_kind[kind] = self.by_kind.get(kind, 0) + n
        if self.used > self.peak:
            self.peak = self.used
        return True

    def take_or_raise(self, kind: str, n: int) -> None:
        if not self.take(kind, n):
            raise OverBudget(kind, n, self.limit, self.free)

    def give(self, kind: str, n: int) -> None:
        """Return `n` bytes of `kind` (never below zero, so a double release cannot mint budget)."""
        if n <= 0:
            return
        have = self.by_kind.get(kind, 0)
        n = min(n, have)
        self.by_kind[kind] = have - n
        self.used -= n

    def hold(self) -> Hold:
        return Hold(self)


class Hold:
    """One request's draws: added as it goes, all returned by one `release()` (idempotent)."""

    __slots__ = ("budget", "drawn")

    def __init__(self, budget: MemoryBudget) -> None:
        self.budget = budget
        self.drawn: dict[str, int] = {}

    def add(self, kind: str, n: int) -> None:
        """Draw `n` bytes of `kind` for this request, or raise OverBudget."""
        self.budget.take_or_raise(kind, n)
        self.drawn[kind] = self.drawn.get(kind, 0) + n

    def drop(self, kind: str, n: int) -> None:
        """Return part of a draw early (a buffer freed before the request ends)."""
        n = min(n, self.drawn.get(kind, 0))
        self.drawn[kind] = self.drawn.get(kind, 0) - n
        self.budget.give(kind, n)

    @property
    def total(self) -> int:
        return sum(self.drawn.values())

    def release(self) -> None:
        drawn, self.drawn = self.drawn, {}
        for kind, n in drawn.items():
            self.budget.give(kind, n)
