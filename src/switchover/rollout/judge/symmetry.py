"""An anytime-valid test of a shift of the bulk (p50) of a latency or length: betting on the symmetry of paired
log-ratios.

Pair the k-th request of old with the k-th of new; r_k = log(new_k / old_k). When new is old scaled by c (the same
distribution when c = 1), r_k - log c is the difference of two independent draws of one distribution, so it is
symmetric about 0, and any bounded odd function of it has mean 0. A bettor who stakes a fixed fraction lam on
psi_k = clip((r_k - log c0) / s_k, -1, 1), with the scale s_k taken from the pairs before k only, holds a wealth
prod_k (1 + lam psi_k) that is a non-negative supermartingale whenever c <= c0 (psi is monotone); an average over a
fixed grid of stakes and of scales is one too, and by Ville's inequality it ever reaches 1/alpha with probability
at most alpha.
Testing by betting: Shafer (2021), https://arxiv.org/abs/1903.06991, and Waudby-Smith & Ramdas (2024),
https://arxiv.org/abs/2010.09686; it is the nonparametric counterpart of the mixture SPRT for means of Lindon et
al. (2022), https://arxiv.org/abs/2205.14762, and uses all of each pair (a sign test uses only which way it points,
roughly two thirds of the information for latency-like data).

The wealth is a running product, so a whole stage (or a whole replayed rollout) is one cumulative sum per stake.
"""

from __future__ import annotations

import math

import numpy as np

STAKES = np.array([0.05, 0.1, 0.2, 0.35, 0.5, 0.7, 0.9])
"""Fractions of wealth staked per pair, averaged over: small ones win on small steady shifts, large ones on big ones."""
SCALES = (0.0, 1.0)
"""Multipliers of the scale, averaged over: 1 bets on how far each pair points (efficient for latencies); 0 (the
scale floor S_MIN) bets on which way it points, a sign bet, which wins on discrete data such as token counts where
most of a shift shows as pairs that merely move past each other. Measured with bench/judge_power.py on the
recorded traces: output length -10 % detected at p90 in 626 pairs with both (more than 3,000 with the scaled bet
alone), TPOT +10 % in 1,600 (1,501 with the scaled bet alone)."""
CAP = 5.0
"""|r| larger than this (a ratio past e^5, e.g. a 0 ms TPOT from a stream delivered in one piece) counts as 5 in
the scale, so one such pair cannot blow the scale up."""
S_MIN = 0.01
"""Smallest scale (1 % in log terms): a run of identical pairs (equal token counts) cannot make psi jump."""
GRID = np.linspace(-3.0, 3.0, 1201)
"""Candidate log-shifts at which the interval is read (0.5 % apart, ratios from 1/20 to 20)."""


def scales(r: np.ndarray) -> np.ndarray:
    """s_k from r_1..r_{k-1} only (predictable): 1.25 x the mean capped |r| (the sd for normal data), 1 at k = 1."""
    a = np.minimum(np.abs(r), CAP)
    n = r.shape[-1]
    csum = np.cumsum(a, axis=-1)
    prev = np.ones_like(r)
    if n > 1:
        prev[..., 1:] = 1.25 * csum[..., :-1] / np.arange(1, n)
    return np.maximum(prev, S_MIN)


def log_wealth(r: np.ndarray, s: np.ndarray, c0: float, sign: int) -> np.ndarray:
    """Running log of the wealth averaged over stakes and SCALES, betting that the shift is above c0 (sign 1) or
    below it (-1)."""
    acc: np.ndarray | None = None
    for mult in SCALES:
        psi = np.clip(sign * (r - c0) / np.maximum(s * mult, S_MIN), -1.0, 1.0)
        for lam in STAKES:
            cum = np.cumsum(np.log1p(lam * psi), axis=-1)
            acc = cum if acc is None else np.logaddexp(acc, cum)
    assert acc is not None
    return acc - math.log(len(STAKES) * len(SCALES))


def first_crossing(logw: np.ndarray, thr: float) -> np.ndarray:
    """Per row, the 1-based index of the first pair at which the log-wealth reaches thr; 0 when it never does."""
    hit = logw >= thr
    return np.where(hit.any(axis=-1), hit.argmax(axis=-1) + 1, 0)


def rejected(r: np.ndarray, s: np.ndarray, c0: float, sign: int, thr: float) -> bool:
    """Has the wealth betting on the side `sign` of c0 reached exp(thr) at any pair so far?"""
    return bool((log_wealth(r, s, c0, sign) >= thr).any())


def interval(r: np.ndarray, s: np.ndarray, alpha: float) -> tuple[float, float]:
    """The log-shifts not rejected at any pair so far, from each side at alpha: [low, high] (+-inf when a grid end
    is not rejected). Rejection is monotone in the shift, so each end is found by bisection over GRID."""
    thr = math.log(1 / alpha)

    def edge(sign: int) -> float:
        # sign 1: rejected for shifts below the low end (a down-set); sign -1: above the high end (an up-set)
        def inside(j: int) -> bool:
            return not rejected(r, s, float(GRID[j]), sign, thr)

        lo_j, hi_j = 0, len(GRID) - 1
        if sign == 1:
            if inside(lo_j):
                return -math.inf
            if not inside(hi_j):
                return float(GRID[hi_j])
            while hi_j - lo_j > 1:  # GRID[lo_j] rejected, GRID[hi_j] inside
                mid = (lo_j + hi_j) // 2
                lo_j, hi_j = (lo_j, mid) if inside(mid) else (mid, hi_j)
            return float(GRID[lo_j])
        if inside(hi_j):
            return math.inf
        if not inside(lo_j):
            return float(GRID[lo_j])
        while hi_j - lo_j > 1:  # GRID[lo_j] inside, GRID[hi_j] rejected
            mid = (lo_j + hi_j) // 2
            lo_j, hi_j = (mid, hi_j) if inside(mid) else (lo_j, mid)
        return float(GRID[hi_j])

    return edge(1), edge(-1)
