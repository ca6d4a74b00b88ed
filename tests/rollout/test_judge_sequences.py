"""The judge's anytime-valid building blocks: quantile confidence sequences, betting on ranks, rate bounds."""

from __future__ import annotations

import itertools
import math

import numpy as np
import pytest

from switchover.rollout.judge import quantiles, ranks, rates, sequential


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


def test_below_past_counts_earlier_old_values_at_or_below_each_value_ties_included() -> None:
    rng = np.random.default_rng(12)
    x, v = rng.integers(0, 6, (3, 70)).astype(float), rng.integers(0, 6, (3, 70)).astype(float)
    want = np.array([[(x[i, :k] <= v[i, k]).sum() for k in range(70)] for i in range(3)])
    assert (ranks.below_past(x, v) == want).all()
    assert (ranks.below_past(x[0], v[0]) == want[0]).all()


@pytest.mark.parametrize("counts", [False, True])
def test_rank_wealth_reaches_one_over_alpha_in_at_most_alpha_of_aa_runs_watched_at_every_pair(counts: bool) -> None:
    rng = np.random.default_rng(2)
    if counts:  # token counts: few distinct values, ties everywhere (broken by the jitter)
        old, new = rng.integers(10, 20, (1500, 1500)), rng.integers(10, 20, (1500, 1500))
    else:
        old, new = rng.lognormal(0, 0.5, (1500, 1500)), rng.lognormal(0, 0.5, (1500, 1500))
    x, y = sequential.log_pairs(old, new, counts=counts)
    psi = ranks.scores(x, y, 0.0)  # the null's boundary: no shift, no floor
    alarms = (ranks.first_crossing(ranks.log_wealth(psi), math.log(100)) > 0).mean()
    assert alarms <= 0.01 + 3 * math.sqrt(0.01 * 0.99 / 1500)  # alpha plus three binomial standard errors
    shifted = ranks.scores(x, y + 0.2, 0.0)
    assert (ranks.first_crossing(ranks.log_wealth(shifted), math.log(100)) > 0).mean() > 0.99


def test_rank_scores_use_only_earlier_old_values_and_start_at_zero() -> None:
    x, y = np.array([0.0, 1.0, 2.0, 3.0]), np.array([5.0, 0.5, 0.5, -1.0])
    psi = ranks.scores(x, y, 0.0)
    assert psi.tolist() == [0.0, 1 - 1, (1 - 2) / 2, (0 - 3) / 3]  # F over earlier old values, 0 at the first
    changed = ranks.scores(np.array([0.0, 1.0, 2.0, 99.0]), y, 0.0)
    assert changed[:3].tolist() == psi[:3].tolist()  # a later old value does not move an earlier score


def test_rank_wealth_is_monotone_in_the_shift_tested() -> None:
    rng = np.random.default_rng(6)
    x, y = rng.standard_normal(400), rng.standard_normal(400) + 0.1
    walls = [ranks.log_wealth(ranks.scores(x, y, c0)) for c0 in (-0.2, 0.0, 0.1, 0.3)]
    assert all((a >= b - 1e-12).all() for a, b in itertools.pairwise(walls))


def test_rank_wealth_keeps_gaining_on_a_small_steady_edge_that_fixed_stakes_lose_on() -> None:
    # mean 0.008, variance 1/6 (the rank score's): a fixed stake of 0.15 or 0.5 loses on average, so a judge with
    # only fixed stakes never decides and its interval stops narrowing; the fading bet decides
    rng = np.random.default_rng(0)
    psi = np.where(rng.random(400_000) < (1 + 0.008 / 0.41) / 2, 0.41, -0.41)
    assert 0 < ranks.first_crossing(ranks.log_wealth(psi), math.log(100)) < 400_000
    assert np.cumsum(np.log1p(0.15 * psi))[-1] < 0 and np.cumsum(np.log1p(0.5 * psi))[-1] < 0
    stakes = ranks.fading(20_000)
    assert stakes[0] == ranks.FADING_CAP and (np.diff(stakes) <= 0).all() and stakes[-1] < 0.05


def test_rank_interval_holds_the_true_shift_and_narrows_with_more_pairs() -> None:
    rng = np.random.default_rng(3)
    x, y = rng.standard_normal(4000) * 0.3, 0.1 + rng.standard_normal(4000) * 0.3
    lo1, hi1 = ranks.interval(x[:300], y[:300], 0.01)
    lo2, hi2 = ranks.interval(x, y, 0.01)
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
