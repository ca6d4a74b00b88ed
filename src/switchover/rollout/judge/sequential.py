"""The judge's tests over many replayed rollouts at once (one row per rollout, one column per pair of requests):
when each rollout would first be declared a regression (or no regression) if the judge were read at every tick.

The same rules as decide.py, written over running sums so a power study of thousands of rollouts runs in
seconds; tests/rollout/test_judge_decisions.py checks that both give the same decision at every checked tick.
"""

from __future__ import annotations

import math

import numpy as np

from switchover.rollout.judge import quantiles, ranks, rates
from switchover.rollout.judge.decide import JITTER, bulk_wealth

NEVER = np.iinfo(np.int64).max
"""The 'first tick' of a rollout that never decided."""


def first_true(hits: np.ndarray, ticks: np.ndarray | None = None) -> np.ndarray:
    """Per row, the tick (1-based pair count, or ticks[j]) of the first True; NEVER when none."""
    any_hit = hits.any(axis=-1)
    j = hits.argmax(axis=-1)
    at = (j + 1) if ticks is None else ticks[j]
    return np.where(any_hit, at, NEVER)


def log_pairs(
    old: np.ndarray, new: np.ndarray, *, counts: bool = False, seed: int = 0
) -> tuple[np.ndarray, np.ndarray]:
    """log old and log new (runs x pairs), each moved by at most JITTER (ties broken at random, as decide.log_pairs
    does)."""
    rng = np.random.default_rng(seed)
    x = ranks.log_values(old, counts=counts) + JITTER * rng.uniform(-1, 1, size=np.shape(old))
    return x, ranks.log_values(new, counts=counts) + JITTER * rng.uniform(-1, 1, size=np.shape(new))


def bulk_first(
    x: np.ndarray, y: np.ndarray, *, floor: float, alpha: float, two_sided: bool = False
) -> tuple[np.ndarray, np.ndarray]:
    """First regress and first ok pair count per rollout for the bulk-ratio test on log values x (old) and y (new),
    runs x pairs; as decide.bulk_direction, the earlier of the two wins and the other is NEVER."""
    wealth = bulk_wealth(x, y, floor=floor, two_sided=two_sided)
    return bulk_first_from(wealth, alpha=alpha, two_sided=two_sided)


def bulk_first_from(wealth: dict[str, np.ndarray], *, alpha: float, two_sided: bool) -> tuple[np.ndarray, np.ndarray]:
    """bulk_first from the log-wealths of decide.bulk_wealth (so many alphas can be read from one computation)."""
    thr = math.log((2 if two_sided else 1) / alpha)

    def at(key: str) -> np.ndarray:
        f = ranks.first_crossing(wealth[key], thr)
        return np.where(f == 0, NEVER, f)

    regress, ok = at("up"), at("below")
    if two_sided:
        regress = np.minimum(regress, at("down"))
        ok = np.maximum(ok, at("above"))
    first_regress = np.where(regress <= ok, regress, NEVER)
    first_ok = np.where(ok < regress, ok, NEVER)
    return first_regress, first_ok


def tail_first(
    old: np.ndarray, new: np.ndarray, *, floor: float, alpha: float, every: int
) -> tuple[np.ndarray, np.ndarray]:
    """First regress and first ok tick per rollout for the p99-ratio test, read every `every` pairs."""
    n = old.shape[-1]
    ticks = np.arange(every, n + 1, every)
    lo, hi = quantiles.count_bounds(0.99, alpha / 2, n)
    regress = np.zeros((old.shape[0], len(ticks)), dtype=bool)
    ok = np.zeros_like(regress)
    for j, t in enumerate(ticks):
        o_lo, o_hi = _orders(old[:, :t], int(lo[t]), int(hi[t]) + 1)
        n_lo, n_hi = _orders(new[:, :t], int(lo[t]), int(hi[t]) + 1)
        regress[:, j] = n_lo > o_hi * (1 + floor)
        ok[:, j] = n_hi < o_lo * (1 + floor)
    return first_true(regress, ticks), first_true(ok, ticks)


def _orders(x: np.ndarray, k_lo: int, k_hi: int) -> tuple[np.ndarray, np.ndarray]:
    """The k_lo-th and k_hi-th smallest per row (1-based; -inf below 1, inf past the row's length), one partition."""
    t, rows = x.shape[-1], x.shape[0]
    wanted = [k - 1 for k in (k_lo, k_hi) if 1 <= k <= t]
    part = np.partition(x, wanted, axis=-1) if wanted else x

    def pick(k: int) -> np.ndarray:
        if k < 1:
            return np.full(rows, -np.inf)
        if k > t:
            return np.full(rows, np.inf)
        return part[:, k - 1]

    return pick(k_lo), pick(k_hi)


def rate_first(
    bad_old: np.ndarray, bad_new: np.ndarray, *, floor: float, alpha: float
) -> tuple[np.ndarray, np.ndarray]:
    """First regress and first ok tick per rollout for the rate-difference test (runs x pairs of 0/1)."""
    pos, zero, neg = rates.pair_counts(bad_old, bad_new)
    thr = math.log(1 / alpha)
    regress = rates.log_wealth_up(pos, zero, neg, floor) >= thr
    ok = rates.log_wealth_down(pos, zero, neg, floor) >= thr
    return first_true(regress), first_true(ok)
