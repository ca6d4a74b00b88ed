"""The judge's anytime-valid building blocks: quantile confidence sequences, betting on symmetry, rate bounds."""

from __future__ import annotations

import math

import numpy as np
import pytest

from switchover.rollout.judge import quantiles, rates, symmetry


@pytest.mark.parametrize("p, c", [(0.5, 8.0), (0.99, 200.0)])
def test_count_bounds_match_the_mixture_checked_count_by_count(p: float, c: float) -> None:
    lo, hi = quantiles.count_bounds(p, 0.01, 3000, c)
    for t in (1, 2, 7, 50, 333, 2999):
        s = np.arange(t + 1.0)
        inside = quantiles.log_mixture(np.full_like(s, t), s, p, c) < math.log(100)
        assert (int(lo[t]), int(hi[t])) == (int(np.argmax(inside)), t - int(np.argmax(inside[::-1])))


@pytest.mark.parametrize("p, q", [(0.5, 0.0), (0.99, 2.3263478740408408)])
def test_quantile_sequence_misses_the_true_quantile_in_at_most_alpha_of_runs_watched_at_every_sample(
    p: float, q: float
) -> None:
    rng = np.random.default_rng(5)
    x = rng.standard_normal((1500, 2000))
    lo, hi = quantiles.count_bounds(p, 0.01, 2000)
    below = quantiles.below_counts(x, q)
    missed = ((below < lo[1:]) | (below > hi[1:])).any(axis=1).mean()
    assert missed <= 0.015  # alpha 0.01 plus three binomial standard errors at 1,500 runs


def test_quantile_interval_is_the_order_statistics_between_the_count_bounds() -> None:
    x = np.arange(1.0, 1001.0)
    low, high = quantiles.quantile_interval(x, 0.5, 0.01)
    lo, hi = quantiles.count_bounds(0.5, 0.01, 1000)
    assert (low, high) == (float(lo[1000]), float(hi[1000] + 1))
    assert low < 500.5 < high


def test_quantile_interval_is_unbounded_with_no_data_and_open_above_for_a_p99_of_few_samples() -> None:
    assert quantiles.quantile_interval(np.array([]), 0.5, 0.01) == (-math.inf, math.inf)
    assert quantiles.quantile_interval(np.arange(20.0), 0.99, 0.01)[1] == math.inf


def test_symmetry_wealth_stays_below_one_over_alpha_in_most_aa_runs_and_crosses_under_a_shift() -> None:
    rng = np.random.default_rng(2)
    r = rng.standard_normal((1000, 1500)) - rng.standard_normal((1000, 1500))
    s = symmetry.scales(r)
    aa = (symmetry.first_crossing(symmetry.log_wealth(r, s, 0.0, 1), math.log(100)) > 0).mean()
    assert aa <= 0.015
    shifted = r + 0.3
    hit = symmetry.first_crossing(symmetry.log_wealth(shifted, symmetry.scales(shifted), 0.0, 1), math.log(100))
    assert (hit > 0).mean() > 0.99


def test_symmetry_scale_uses_only_earlier_pairs() -> None:
    r = np.array([0.1, 0.1, 100.0, 0.1])
    s = symmetry.scales(r)
    assert s[0] == 1.0 and s[2] == pytest.approx(1.25 * 0.1)  # the 100 at k=3 is not in its own scale
    assert s[3] == pytest.approx(1.25 * (0.1 + 0.1 + symmetry.CAP) / 3)


def test_symmetry_interval_holds_the_true_shift_and_narrows_with_more_pairs() -> None:
    rng = np.random.default_rng(3)
    r = 0.1 + rng.standard_normal(4000) * 0.3 - rng.standard_normal(4000) * 0.3
    few, many = r[:300], r
    lo1, hi1 = symmetry.interval(few, symmetry.scales(few), 0.01)
    lo2, hi2 = symmetry.interval(many, symmetry.scales(many), 0.01)
    assert lo1 < 0.1 < hi1 and lo2 < 0.1 < hi2
    assert hi2 - lo2 < hi1 - lo1


def test_rate_bounds_cover_the_observed_difference_and_shrink_with_pairs() -> None:
    lo, hi = rates.bounds(20, 980, 0, 0.01)
    assert lo > 0 and lo < 0.02 < hi
    lo_big, hi_big = rates.bounds(200, 9800, 0, 0.01)
    assert hi_big - lo_big < hi - lo


def test_rate_wealth_against_no_rise_stays_low_when_both_arms_fail_alike() -> None:
    rng = np.random.default_rng(4)
    a, b = rng.random((1000, 3000)) < 0.03, rng.random((1000, 3000)) < 0.03
    pos, zero, neg = rates.pair_counts(a, b)
    false_alarms = (rates.log_wealth_up(pos, zero, neg, 0.0) >= math.log(100)).any(axis=1).mean()
    assert false_alarms <= 0.015


def test_pair_counts_count_new_only_same_and_old_only_failures_cumulatively() -> None:
    pos, zero, neg = rates.pair_counts(np.array([0, 1, 0, 1]), np.array([1, 1, 0, 0]))
    assert pos.tolist() == [1, 1, 1, 1] and zero.tolist() == [0, 1, 2, 2] and neg.tolist() == [0, 0, 0, 1]
