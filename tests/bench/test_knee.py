"""The knee on synthetic curves with a known bend, its CI, and the queue-vs-slow verdict."""

from __future__ import annotations

import numpy as np
import pytest

from switchover.bench.knee import find_knee, hinge_fit, knee_with_ci, queue_or_slow

LADDER = [1, 2, 4, 8, 16, 32, 64]


def bent(x: float, k: float = 8.0, base: float = 20.0, slope: float = 2.0) -> float:
    """Flat at `base` up to k, then rising `slope` per unit of concurrency."""
    return base + slope * max(0.0, x - k)


def test_hinge_fit_recovers_an_exact_bend():
    fit = hinge_fit(LADDER, [bent(x) for x in LADDER], 8.0)
    assert fit.sse == pytest.approx(0.0, abs=1e-9)
    assert (fit.b, fit.slope_after) == (pytest.approx(0.0, abs=1e-9), pytest.approx(2.0))


def test_knee_found_at_the_known_bend():
    fit = find_knee(LADDER, [bent(x) for x in LADDER])
    assert fit is not None and fit.k == pytest.approx(8.0, abs=0.5)


def test_knee_between_ladder_steps_is_located_between_them():
    fit = find_knee(LADDER, [bent(x, k=12.0) for x in LADDER])
    assert fit is not None and 8.0 < fit.k < 16.0


def test_flat_curve_has_no_knee():
    assert find_knee(LADDER, [20.0] * len(LADDER)) is None


def test_steady_linear_rise_has_no_knee():
    assert find_knee(LADDER, [10.0 + 3.0 * x for x in LADDER]) is None


def test_small_bump_below_min_rise_is_not_a_knee():
    assert find_knee(LADDER, [20, 20, 20, 20, 20, 21, 22]) is None


def test_bootstrap_ci_contains_the_bend_and_verdict_says_slow():
    rng = np.random.default_rng(1)
    samples = [list(bent(x) * (1 + 0.02 * rng.standard_normal(200))) for x in LADDER]
    ttft = [50.0] * len(LADDER)
    tpot = [bent(x) for x in LADDER]
    res = knee_with_ci(LADDER, samples, q=99, boot=100, ttft_p50=ttft, tpot_p50=tpot)
    assert res.found
    assert res.ci_low is not None and res.ci_high is not None
    assert res.ci_low <= 8.5 and res.ci_high >= 7.5
    assert res.step_concurrency == 8
    assert res.verdict == "slow"
    assert res.bootstrap_found is not None and res.bootstrap_found > 0.9


def test_no_knee_in_range_message():
    samples = [[20.0 + 0.1 * i for i in range(50)] for _ in LADDER]
    res = knee_with_ci(LADDER, samples, boot=20)
    assert not res.found
    assert res.message.startswith("no knee in range 1..64")


def test_too_few_steps_is_no_knee_with_reason():
    res = knee_with_ci([1, 2], [[1.0], [2.0]], boot=5)
    assert not res.found and "at least 3 steps" in res.message


def test_p99_on_few_samples_is_noted():
    samples = [[bent(x)] * 10 for x in LADDER]
    res = knee_with_ci(LADDER, samples, boot=5)
    assert any("fewer than 100 samples" in n for n in res.notes)


@pytest.mark.parametrize(
    ("ttft", "tpot", "verdict"),
    [
        ((10, 100), (5, 5.5), "queue"),
        ((10, 11), (5, 20), "slow"),
        ((10, 30), (5, 20), "both"),
        ((10, 11), (5, 5.2), "unclear"),
    ],
)
def test_queue_or_slow(ttft, tpot, verdict):
    assert queue_or_slow(ttft[0], ttft[1], tpot[0], tpot[1])[0] == verdict
