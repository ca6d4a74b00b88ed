"""Anytime-valid bounds on a rate difference (new's share of bad requests minus old's) from pairs of requests.

Pair the k-th request of old with the k-th of new; D_k = bad(new_k) - bad(old_k) is -1, 0 or 1, independent across
pairs, with mean d = p_new - p_old. For a hypothesised bound m, the wealth of a bettor who stakes a fixed fraction
on D_k - m, prod_k (1 + lam (D_k - m)), is a non-negative supermartingale when d <= m; an average of such wealths
over a fixed grid of stakes is one too, and by Ville's inequality it reaches 1/alpha with probability at most alpha
(Waudby-Smith & Ramdas (2024), "Estimating means of bounded random variables by betting", JRSS-B,
https://arxiv.org/abs/2010.09686, section 4). It is the e-process counterpart of the mixture SPRT for rates in
Lindon et al. (2022), https://arxiv.org/abs/2205.14762. As D takes three values the wealth depends on the three
counts only, so a whole stage (or a whole benchmark run) is judged from cumulative counts.
"""

from __future__ import annotations

import math

import numpy as np

STAKES = np.array([0.02, 0.05, 0.1, 0.2, 0.35, 0.5, 0.7, 0.9])
"""Fractions of the largest safe stake averaged over (small ones win on small steady differences, large ones on
rare events such as a 1 % error rate)."""
GRID = np.linspace(-1.0, 1.0, 4001)
"""Candidate differences at which bounds are read (0.05 pp apart)."""


def log_wealth_up(
    n_pos: np.ndarray | int, n_zero: np.ndarray | int, n_neg: np.ndarray | int, m: float | np.ndarray
) -> np.ndarray:
    """log of the mixture wealth against 'd <= m' (grows when new is worse than old by more than m)."""
    m = np.asarray(m, dtype=float)[..., None]
    lam = STAKES / (1 + m)  # keeps 1 + lam (-1 - m) > 0
    terms = (
        np.asarray(n_pos, dtype=float)[..., None] * np.log1p(lam * (1 - m))
        + np.asarray(n_zero, dtype=float)[..., None] * np.log1p(-lam * m)
        + np.asarray(n_neg, dtype=float)[..., None] * np.log1p(-lam * (1 + m))
    )
    return _log_mean_exp(terms)


def log_wealth_down(
    n_pos: np.ndarray | int, n_zero: np.ndarray | int, n_neg: np.ndarray | int, m: float | np.ndarray
) -> np.ndarray:
    """log of the mixture wealth against 'd >= m' (grows when new is worse by less than m, or better)."""
    m = np.asarray(m, dtype=float)[..., None]
    lam = STAKES / (1 - m)  # keeps 1 - lam (1 - m) > 0
    terms = (
        np.asarray(n_pos, dtype=float)[..., None] * np.log1p(-lam * (1 - m))
        + np.asarray(n_zero, dtype=float)[..., None] * np.log1p(lam * m)
        + np.asarray(n_neg, dtype=float)[..., None] * np.log1p(lam * (1 + m))
    )
    return _log_mean_exp(terms)


def _log_mean_exp(terms: np.ndarray) -> np.ndarray:
    top = terms.max(axis=-1)
    return top + np.log(np.exp(terms - top[..., None]).mean(axis=-1))


def bounds(n_pos: int, n_zero: int, n_neg: int, alpha: float) -> tuple[float, float]:
    """The difference's lower and upper bound (each holds with probability 1 - alpha at every tick)."""
    thr = math.log(1 / alpha)
    inner = GRID[1:-1]  # m = -1 and 1 are the range's ends: always inside
    up = log_wealth_up(n_pos, n_zero, n_neg, inner) < thr  # m not rejected from below
    down = log_wealth_down(n_pos, n_zero, n_neg, inner) < thr
    low = float(inner[np.argmax(up)]) if up.any() else 1.0
    high = float(inner[len(inner) - 1 - np.argmax(down[::-1])]) if down.any() else -1.0
    return (-1.0 if low <= inner[0] else low), (1.0 if high >= inner[-1] else high)


def pair_counts(bad_old: np.ndarray, bad_new: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Cumulative (new bad only, same, old bad only) counts over the pairs (row-wise for 2-D arrays of runs)."""
    d = bad_new.astype(np.int8) - bad_old.astype(np.int8)
    pos = np.cumsum(d > 0, axis=-1)
    neg = np.cumsum(d < 0, axis=-1)
    n = np.arange(1, d.shape[-1] + 1)
    return pos, n - pos - neg, neg
