"""The knee: the concurrency where a latency tail (p99 TPOT by default) starts to rise.

Model: a continuous two-segment (hinge) line  y = a + b·x + d·max(0, x − k)  fitted by least squares for
each candidate k; the best k is the knee when the curve really bends there (docs/metrics.md, "Knee"):
  - the fitted rise past the knee is at least `min_rise` (default 25%) of the fitted value at the knee, and
  - the slope past the knee is at least `min_slope_ratio` (default 2) times the slope before it
    (any positive slope counts when the slope before is <= 0).
Uncertainty: the per-request samples of every step are resampled with replacement, the percentile and the
fit are recomputed, and the 2.5–97.5% range of the knee over the resamples that found one is the CI.
Past the knee, the median TTFT and median TPOT growth say whether requests queue (TTFT grows) or slow
(TPOT grows).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from switchover.evidence.bench_findings import KneeResult

MIN_RISE = 0.25
MIN_SLOPE_RATIO = 2.0
GROWTH = 0.25  # a median that grew by less than 25% past the knee did not "grow"


@dataclass(frozen=True, slots=True)
class HingeFit:
    k: float
    a: float
    b: float  # slope before k
    d: float  # change of slope at k
    sse: float

    @property
    def slope_after(self) -> float:
        return self.b + self.d

    def at(self, x: float) -> float:
        return self.a + self.b * x + self.d * max(0.0, x - self.k)


def hinge_fit(x: Sequence[float], y: Sequence[float], k: float) -> HingeFit:
    """Least-squares hinge with its break fixed at k."""
    xa, ya = np.asarray(x, float), np.asarray(y, float)
    design = np.column_stack([np.ones_like(xa), xa, np.maximum(0.0, xa - k)])
    coef, *_ = np.linalg.lstsq(design, ya, rcond=None)
    resid = ya - design @ coef
    return HingeFit(k=float(k), a=float(coef[0]), b=float(coef[1]), d=float(coef[2]), sse=float(resid @ resid))


def _candidates(x: np.ndarray, grid: int) -> np.ndarray:
    interior = x[1:-1]
    if len(x) <= 3:
        return interior
    dense = np.linspace(x[1], x[-2], grid)
    return np.unique(np.concatenate([interior, dense]))


def best_hinge(x: Sequence[float], y: Sequence[float], grid: int = 64) -> HingeFit | None:
    """The hinge with the least squared error over breaks between the second and second-last x."""
    xa = np.asarray(x, float)
    if len(xa) < 3:
        return None
    fits = [hinge_fit(x, y, float(k)) for k in _candidates(xa, grid)]
    return min(fits, key=lambda f: (round(f.sse, 12), f.k)) if fits else None


def is_bend(fit: HingeFit, x_max: float, min_rise: float = MIN_RISE, min_slope_ratio: float = MIN_SLOPE_RATIO) -> bool:
    """Does the fitted curve really bend upward at k (rise and slope-ratio tests above)?"""
    base = abs(fit.at(fit.k))
    rise = fit.slope_after * (x_max - fit.k)
    if fit.slope_after <= 0 or rise < min_rise * base:
        return False
    if fit.b <= 0:
        return True
    return fit.slope_after >= min_slope_ratio * fit.b


def find_knee(
    x: Sequence[float], y: Sequence[float], *, min_rise: float = MIN_RISE, min_slope_ratio: float = MIN_SLOPE_RATIO
) -> HingeFit | None:
    """The knee of one curve (x ascending), or None when it does not bend upward in range."""
    order = np.argsort(np.asarray(x, float))
    xs = [float(x[i]) for i in order]
    ys = [float(y[i]) for i in order]
    fit = best_hinge(xs, ys)
    if fit is None or not is_bend(fit, xs[-1], min_rise, min_slope_ratio):
        return None
    return fit


def queue_or_slow(ttft_knee: float, ttft_last: float, tpot_knee: float, tpot_last: float) -> tuple[str, float, float]:
    """Compare the growth of median TTFT and median TPOT from the knee step to the last step."""
    g_ttft = ttft_last / ttft_knee - 1 if ttft_knee > 0 else float("inf")
    g_tpot = tpot_last / tpot_knee - 1 if tpot_knee > 0 else float("inf")
    if g_ttft > GROWTH and g_ttft >= 2 * max(g_tpot, 0):
        verdict = "queue"
    elif g_tpot > GROWTH and g_tpot >= 2 * max(g_ttft, 0):
        verdict = "slow"
    elif g_ttft > GROWTH and g_tpot > GROWTH:
        verdict = "both"
    else:
        verdict = "unclear"
    return verdict, g_ttft, g_tpot


def knee_with_ci(
    x: Sequence[float],
    samples: Sequence[Sequence[float]],
    *,
    q: float = 99.0,
    metric: str = "tpot p99",
    boot: int = 200,
    seed: int = 0,
    ttft_p50: Sequence[float | None] | None = None,
    tpot_p50: Sequence[float | None] | None = None,
    min_rise: float = MIN_RISE,
    min_slope_ratio: float = MIN_SLOPE_RATIO,
) -> KneeResult:
    """Knee of percentile q of per-step samples against x (concurrency), with a bootstrap CI and verdict."""
    pts = [(float(c), list(s)) for c, s in zip(x, samples, strict=True) if len(s) > 0]
    pts.sort(key=lambda p: p[0])
    notes: list[str] = []
    if len(pts) < 3:
        return KneeResult(
            metric=metric, found=False, message=f"no knee in range: need at least 3 steps with data, have {len(pts)}"
        )
    small = [c for c, s in pts if len(s) < 100 / (100 - q)] if q < 100 else []
    if small:
        notes.append(
            f"p{q:g} rests on fewer than {int(100 / (100 - q))} samples at concurrency "
            + ", ".join(f"{c:g}" for c in small)
            + " (it is close to the maximum there)"
        )
    xs = [c for c, _ in pts]
    ys = [float(np.percentile(s, q)) for _, s in pts]
    fit = find_knee(xs, ys, min_rise=min_rise, min_slope_ratio=min_slope_ratio)
    rng = np.random.default_rng(seed)
    ks: list[float] = []
    arrays = [np.asarray(s, float) for _, s in pts]
    for _ in range(boot):
        yb = [float(np.percentile(rng.choice(a, size=a.size, replace=True), q)) for a in arrays]
        fb = find_knee(xs, yb, min_rise=min_rise, min_slope_ratio=min_slope_ratio)
        if fb is not None:
            ks.append(fb.k)
    share = len(ks) / boot if boot else None
    if fit is None:
        return KneeResult(
            metric=metric,
            found=False,
            bootstrap_found=share,
            notes=notes,
            message=f"no knee in range {xs[0]:g}..{xs[-1]:g}: {metric} does not bend upward",
        )
    at_or_below = [c for c in xs if c <= fit.k + 1e-9]
    step_c = at_or_below[-1] if at_or_below else xs[0]
    res = KneeResult(
        metric=metric,
        found=True,
        concurrency=fit.k,
        step_concurrency=int(step_c) if float(step_c).is_integer() else step_c,
        bootstrap_found=share,
        slope_before=fit.b,
        slope_after=fit.slope_after,
        notes=notes,
        message=f"knee at concurrency ≈ {fit.k:.3g}",
    )
    if ks:
        res.ci_low, res.ci_high = float(np.percentile(ks, 2.5)), float(np.percentile(ks, 97.5))
        res.message += f" (95% CI {res.ci_low:.3g}–{res.ci_high:.3g}, found in {share:.0%} of resamples)"
    if share is not None and share < 0.5:
        notes.append("fewer than half of the bootstrap resamples found a knee: treat it as tentative")
    if ttft_p50 is not None and tpot_p50 is not None:
        order = np.argsort(np.asarray(x, float))
        tt = [ttft_p50[i] for i in order]
        tp = [tpot_p50[i] for i in order]
        xo = [float(x[i]) for i in order]
        ki = xo.index(float(step_c))
        if ki < len(xo) - 1 and None not in (tt[ki], tt[-1], tp[ki], tp[-1]):
            verdict, g1, g2 = queue_or_slow(
                float(tt[ki] or 0), float(tt[-1] or 0), float(tp[ki] or 0), float(tp[-1] or 0)
            )
            res.verdict, res.ttft_growth, res.tpot_growth = verdict, g1, g2
            what = {
                "queue": "past it requests queue (median TTFT grows)",
                "slow": "past it requests slow down (median TPOT grows)",
                "both": "past it requests both queue and slow down",
                "unclear": "past it neither median grows clearly",
            }[verdict]
            res.message += f"; {what}"
    return res
