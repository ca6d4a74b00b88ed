"""The judge's three tests, each turning two arms' observations into a Decision at one tick.

Every test reads an anytime-valid interval (quantiles.py, rates.py) and compares it with the practical floor: the
whole interval beyond the floor is a regression, the whole interval within it is "no regression" (the stage may
end early), anything else is undecided. The interval holds at every tick with probability 1 - alpha, so a wrong
decision of either kind is declared, ever, with probability at most alpha per test and metric.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from switchover.rollout.judge import quantiles, ranks, rates
from switchover.rollout.judge.models import Decision, Direction, Interval, JudgeTest, Unit, distance

JITTER = 1e-9
"""Log-ratios are moved by at most this (seeded) so that ties (equal token counts) are broken at random: the
quantile sequences assume no ties, and no floor is anywhere near 1e-9."""


@dataclass(frozen=True)
class _Frame:
    """What a decision is about (the parts that do not depend on the data's verdict)."""

    test: JudgeTest
    metric: str
    unit: Unit
    floor: float
    alpha: float
    n_old: int
    n_new: int
    two_sided: bool = False

    def undecided(self, reason: str) -> Decision:
        return Decision(
            test=self.test,
            metric=self.metric,
            direction="undecided",
            unit=self.unit,
            floor=self.floor,
            two_sided=self.two_sided,
            requests_old=self.n_old,
            requests_new=self.n_new,
            alpha=self.alpha,
            reason=f"{self.metric} {self.test}: {reason}",
        )


def log_ratio_values(old: np.ndarray, new: np.ndarray, *, counts: bool = False) -> np.ndarray:
    """log(new / old) elementwise; counts (token lengths) compare n + 1 so 0 is allowed. A 0 ms latency (a stream
    delivered in one piece) is the most extreme ratio either way, and 0 against 0 is no change, never NaN."""
    plus = 1.0 if counts else 0.0
    with np.errstate(divide="ignore", invalid="ignore"):
        r = np.log(np.asarray(new, dtype=float) + plus) - np.log(np.asarray(old, dtype=float) + plus)
    return np.nan_to_num(r, nan=0.0, posinf=50.0, neginf=-50.0)


def log_pairs(old: np.ndarray, new: np.ndarray, *, counts: bool = False) -> tuple[np.ndarray, np.ndarray]:
    """log old_k and log new_k over the pairs k < min(len), each moved by a seeded jitter of at most JITTER."""
    n = min(len(old), len(new))
    jit = JITTER * np.random.default_rng(0).uniform(-1, 1, size=2 * n)  # interleaved: a prefix keeps its jitter
    x = ranks.log_values(np.asarray(old[:n]), counts=counts) + jit[0::2]
    return x, ranks.log_values(np.asarray(new[:n]), counts=counts) + jit[1::2]


def bulk_ratio(
    metric: str,
    old: np.ndarray,
    new: np.ndarray,
    *,
    floor: float,
    alpha: float,
    two_sided: bool = False,
    counts: bool = False,
) -> Decision:
    """Bulk shift (p50): the typical new/old ratio over pairs of requests, by betting on ranks (ranks.py).
    Two-sided (output length): each side at alpha / 2."""
    x, y = log_pairs(old, new, counts=counts)
    t = len(x)
    base = _Frame("bulk_ratio", metric, "ratio", floor, alpha, t, t, two_sided)
    if t == 0:
        return base.undecided("no pairs of requests yet")
    direction = bulk_direction(x, y, floor=floor, alpha=alpha, two_sided=two_sided)
    low, high = ranks.interval(x, y, alpha / 2 if two_sided else alpha)
    interval = Interval(
        low=math.expm1(low) if math.isfinite(low) else None, high=math.expm1(high) if math.isfinite(high) else None
    )
    effect = math.expm1(float(np.median(log_ratio_values(old[:t], new[:t], counts=counts))))
    return _decision(base, direction, effect, interval)


def bulk_wealth(x: np.ndarray, y: np.ndarray, *, floor: float, two_sided: bool) -> dict[str, np.ndarray]:
    """The running log-wealth of each bet behind a bulk decision: up (shift above log(1 + floor)), below (under
    it); two-sided also down (below -log(1 + floor)) and above (over it)."""
    edge = math.log1p(floor)
    own = ranks.below_past(x, x)
    psi = ranks.scores(x, y, edge, own)
    out = {"up": ranks.log_wealth(psi), "below": ranks.log_wealth(-psi)}
    if two_sided:
        psi = ranks.scores(x, y, -edge, own)
        out["down"], out["above"] = ranks.log_wealth(-psi), ranks.log_wealth(psi)
    return out


def bulk_direction(x: np.ndarray, y: np.ndarray, *, floor: float, alpha: float, two_sided: bool) -> Direction:
    """Whichever side's wealth reached 1/alpha first: above log(1 + floor) is a regression, below it is ok
    (two-sided: below -log(1 + floor) is a regression too, and ok needs both sides, each at alpha / 2)."""
    thr = math.log((2 if two_sided else 1) / alpha)
    wealth = bulk_wealth(x, y, floor=floor, two_sided=two_sided)
    return combine({k: ranks.first_crossing(w, thr) for k, w in wealth.items()}, two_sided)


def combine(firsts: dict[str, np.ndarray | np.integer | int], two_sided: bool) -> Direction:
    """The decision from first-crossing pair counts (0 = never): the earlier of regress and ok."""
    regress = [int(firsts["up"])] + ([int(firsts["down"])] if two_sided else [])
    regress_at = min((x for x in regress if x), default=0)
    ok_parts = [int(firsts["below"])] + ([int(firsts["above"])] if two_sided else [])
    ok_at = max(ok_parts) if all(ok_parts) else 0
    if regress_at and (not ok_at or regress_at <= ok_at):
        return "regress"
    return "ok" if ok_at else "undecided"


def p99_ratio(metric: str, old: np.ndarray, new: np.ndarray, *, floor: float, alpha: float) -> Decision:
    """Tail: new's p99 over old's p99, each arm's p99 from its own confidence sequence at alpha / 2."""
    a, b = np.asarray(old, dtype=float), np.asarray(new, dtype=float)
    base = _Frame("p99_ratio", metric, "ratio", floor, alpha, len(a), len(b))
    if not len(a) or not len(b):
        return base.undecided("no requests on one arm yet")
    jit = np.random.default_rng(1)
    a = a * (1 + JITTER * jit.uniform(-1, 1, size=len(a)))
    b = b * (1 + JITTER * jit.uniform(-1, 1, size=len(b)))
    old_lo, old_hi = quantiles.quantile_interval(a, 0.99, alpha / 2)
    new_lo, new_hi = quantiles.quantile_interval(b, 0.99, alpha / 2)
    direction = tail_direction(old_lo, old_hi, new_lo, new_hi, floor)
    low = new_lo / old_hi - 1 if math.isfinite(new_lo) and math.isfinite(old_hi) and old_hi > 0 else None
    high = new_hi / old_lo - 1 if math.isfinite(new_hi) and math.isfinite(old_lo) and old_lo > 0 else None
    pa, pb = float(np.percentile(a, 99)), float(np.percentile(b, 99))
    effect = pb / pa - 1 if pa > 0 else None
    return _decision(base, direction, effect, Interval(low=low, high=high))


def tail_direction(old_lo: float, old_hi: float, new_lo: float, new_hi: float, floor: float) -> Direction:
    """Regress when new's p99 is surely above old's times (1 + floor); ok when surely below it."""
    if new_lo > old_hi * (1 + floor):
        return "regress"
    if new_hi < old_lo * (1 + floor):
        return "ok"
    return "undecided"


def rate_difference(metric: str, bad_old: np.ndarray, bad_new: np.ndarray, *, floor: float, alpha: float) -> Decision:
    """Rates: new's share of bad requests minus old's over pairs of requests, with its betting confidence sequence."""
    n = min(len(bad_old), len(bad_new))
    base = _Frame("rate_difference", metric, "difference", floor, alpha, n, n)
    if n == 0:
        return base.undecided("no pairs of requests yet")
    pos, zero, neg = (int(c[-1]) for c in rates.pair_counts(np.asarray(bad_old[:n]), np.asarray(bad_new[:n])))
    direction = rate_direction(pos, zero, neg, floor, alpha)
    low, high = rates.bounds(pos, zero, neg, alpha)
    effect = (pos - neg) / n
    return _decision(base, direction, effect, Interval(low=low, high=high))


def rate_direction(pos: int, zero: int, neg: int, floor: float, alpha: float) -> Direction:
    """Regress when the wealth against 'rise <= floor' reaches 1/alpha; ok when the one against 'rise >= floor' does."""
    thr = math.log(1 / alpha)
    if float(rates.log_wealth_up(np.asarray(pos), np.asarray(zero), np.asarray(neg), floor)) >= thr:
        return "regress"
    if float(rates.log_wealth_down(np.asarray(pos), np.asarray(zero), np.asarray(neg), floor)) >= thr:
        return "ok"
    return "undecided"


def _decision(base: _Frame, direction: Direction, effect: float | None, interval: Interval) -> Decision:
    pct = base.unit == "ratio"
    est = "-" if effect is None else (f"{effect * 100:+.1f} %" if pct else f"{effect * 100:+.2f} pp")
    floor_text = f"{'±' if base.two_sided else '+'}{base.floor * 100:g} {'%' if pct else 'pp'}"
    what = {
        "regress": "regression: the whole interval lies beyond",
        "ok": "no regression: the interval lies within",
        "undecided": "undecided: the interval straddles",
    }[direction]
    reason = (
        f"{base.metric} {base.test} {est} {interval.text(base.unit)} ({what} the floor {floor_text}; "
        f"{base.n_old} old / {base.n_new} new requests)"
    )
    return Decision(
        test=base.test,
        metric=base.metric,
        direction=direction,
        unit=base.unit,
        effect=effect,
        interval=interval,
        floor=base.floor,
        two_sided=base.two_sided,
        requests_old=base.n_old,
        requests_new=base.n_new,
        alpha=base.alpha,
        reason=reason,
        to_decision=0.0 if direction != "undecided" else distance(interval, base.floor, base.two_sided),
    )
