"""What the judge says about one metric: the test, the effect with its anytime-valid interval, and how far from a
decision it still is."""

from __future__ import annotations

import math
from typing import Literal

from pydantic import BaseModel, Field

JudgeTest = Literal["bulk_ratio", "p99_ratio", "rate_difference"]
"""bulk_ratio: the typical new/old ratio over pairs of requests (a shift of the bulk, p50); p99_ratio: new's p99 over
old's p99 (the tail); rate_difference: new's share minus old's share (errors, fallbacks, truncations, invalid JSON)."""
Direction = Literal["regress", "ok", "undecided"]
Unit = Literal["ratio", "difference"]


class Interval(BaseModel):
    """Bounds of the effect that hold at every tick with the configured error level; None is unbounded."""

    low: float | None = None
    high: float | None = None

    def text(self, unit: Unit) -> str:
        """The bounds as a person reads them (+3.1 % for ratios, +0.40 pp for differences)."""
        return f"[{_fmt(self.low, unit, '-inf')}, {_fmt(self.high, unit, '+inf')}]"


def _fmt(x: float | None, unit: Unit, unbounded: str) -> str:
    if x is None or math.isinf(x):
        return unbounded
    return f"{x * 100:+.1f} %" if unit == "ratio" else f"{x * 100:+.2f} pp"


class Decision(BaseModel):
    """One test on one metric at one tick: regress, ok (no regression beyond the floor) or undecided."""

    test: JudgeTest
    metric: str
    direction: Direction
    unit: Unit = Field(description="ratio: effect is new/old - 1; difference: new's share minus old's")
    effect: float | None = Field(default=None, description="Point estimate of the effect; None before any pair")
    interval: Interval = Field(default_factory=Interval)
    floor: float = Field(description="The practical floor: effects within it are no regression")
    two_sided: bool = Field(default=False, description="A change either way is a regression (output length)")
    requests_old: int = Field(description="Old-arm observations of this metric used")
    requests_new: int = Field(description="New-arm observations of this metric used")
    to_decision: float | None = Field(
        default=None,
        description="How far the interval still is from clearing the floor (effect units, the smaller of the "
        "two ways to decide); 0 once decided, None while unbounded",
    )
    alpha: float
    reason: str

    @property
    def requests(self) -> int:
        """Requests the decision used (both arms)."""
        return self.requests_old + self.requests_new


def distance(interval: Interval, floor: float, two_sided: bool) -> float | None:
    """The smaller of: how far the low bound is below the floor (to decide regress) and how far the high bound is
    above it (to decide ok); 0 when decided."""
    lo, hi = interval.low, interval.high
    if lo is None or hi is None or math.isinf(lo) or math.isinf(hi):
        return None
    to_regress = max(0.0, floor - lo)
    to_ok = max(0.0, hi - floor)
    if two_sided:
        to_regress = min(to_regress, max(0.0, hi + floor))
        to_ok = max(to_ok, max(0.0, -floor - lo))
    return min(to_regress, to_ok)
