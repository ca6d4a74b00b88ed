"""The judge's decisions: each test's regress / ok / undecided against the floor, its interval and request counts,
the vectorised power-study form agreeing with the per-tick form, the panel over ledger rows, Kayenta's rule."""

from __future__ import annotations

import math

import numpy as np
import pytest

from switchover.config.rollout_judge import JudgeConfig
from switchover.rollout.judge import kayenta, sequential
from switchover.rollout.judge.decide import (
    bulk_ratio,
    combine,
    log_pairs,
    log_ratio_values,
    p99_ratio,
    rate_difference,
    tail_direction,
)
from switchover.rollout.judge.models import Interval, distance
from switchover.rollout.judge.panel import judge_rows, verdict_of
from tests.rollout.builders import row

RNG = np.random.default_rng(11)
OLD = RNG.lognormal(2.0, 0.3, 3000)


def _lat(n: int, scale: float, seed: int) -> np.ndarray:
    return np.random.default_rng(seed).lognormal(2.0, 0.3, n) * scale


@pytest.mark.parametrize(
    "scale, n, floor, expected",
    [
        (1.30, 400, 0.02, "regress"),  # a 30 % slowdown, well past the 2 % floor
        (1.00, 3000, 0.10, "ok"),  # no change, enough pairs to rule out 10 %
        (1.00, 20, 0.02, "undecided"),  # too few pairs either way
        (0.80, 400, 0.02, "ok"),  # faster is no regression (one-sided)
    ],
)
def test_bulk_ratio_decides_against_the_floor(scale: float, n: int, floor: float, expected: str) -> None:
    d = bulk_ratio("tpot_ms", _lat(n, 1.0, 1), _lat(n, scale, 2), floor=floor, alpha=0.01)
    assert d.direction == expected
    assert d.requests_old == d.requests_new == n
    assert d.test == "bulk_ratio" and d.unit == "ratio"
    if expected == "regress":
        assert d.interval.low is not None and d.interval.low > floor
        assert d.to_decision == 0.0
    if expected == "undecided":
        assert "straddles" in d.reason


def test_bulk_ratio_two_sided_calls_a_shorter_output_a_regression() -> None:
    old = np.random.default_rng(3).integers(20, 200, 800).astype(float)
    new = np.round(np.random.default_rng(4).integers(20, 200, 800) * 0.8)
    d = bulk_ratio("output_tokens", old, new, floor=0.02, alpha=0.01, two_sided=True, counts=True)
    assert d.direction == "regress" and d.two_sided
    one_sided = bulk_ratio("output_tokens", old, new, floor=0.02, alpha=0.01, counts=True)
    assert one_sided.direction == "ok"


def test_bulk_ratio_reason_names_metric_effect_interval_floor_and_requests() -> None:
    d = bulk_ratio("tpot_ms", _lat(500, 1.0, 5), _lat(500, 1.3, 6), floor=0.02, alpha=0.01)
    assert d.reason.startswith("tpot_ms bulk_ratio +")
    assert "floor +2 %" in d.reason and "500 old / 500 new requests" in d.reason


def test_log_ratios_turn_zero_latencies_into_extreme_ratios_not_nan() -> None:
    r = log_ratio_values(np.array([0.0, 0.0, 2.0]), np.array([0.0, 1.0, 0.0]))
    assert r.tolist() == [0.0, 50.0, -50.0]
    assert [len(v) for v in log_pairs(np.ones(5), np.ones(3))] == [3, 3]


@pytest.mark.parametrize(
    "old_lo, old_hi, new_lo, new_hi, expected",
    [
        (9, 10, 12, 14, "regress"),
        (9, 10, 8, 9.5, "ok"),
        (9, 10, 9, 12, "undecided"),
        (9, math.inf, 20, 30, "undecided"),
    ],
)
def test_tail_direction_compares_new_p99_bounds_with_old_times_the_floor(
    old_lo: float, old_hi: float, new_lo: float, new_hi: float, expected: str
) -> None:
    assert tail_direction(old_lo, old_hi, new_lo, new_hi, 0.10) == expected


def test_p99_ratio_regresses_on_a_doubled_tail_and_is_undecided_on_a_few_samples() -> None:
    old = _lat(4000, 1.0, 7)
    new = _lat(4000, 1.0, 8)
    new[new > np.quantile(new, 0.97)] *= 2.0
    assert p99_ratio("tpot_ms", old, new, floor=0.10, alpha=0.01).direction == "regress"
    few = p99_ratio("tpot_ms", old[:30], new[:30], floor=0.10, alpha=0.01)
    assert few.direction == "undecided" and few.interval.high is None and few.to_decision is None


@pytest.mark.parametrize(
    "p_old, p_new, n, expected", [(0.0, 0.03, 3000, "regress"), (0.0, 0.0, 4000, "ok"), (0.01, 0.01, 50, "undecided")]
)
def test_rate_difference_decides_against_the_absolute_floor(p_old: float, p_new: float, n: int, expected: str) -> None:
    rng = np.random.default_rng(9)
    d = rate_difference("error", rng.random(n) < p_old, rng.random(n) < p_new, floor=0.0025, alpha=0.01)
    assert d.direction == expected and d.unit == "difference"


def test_combine_takes_the_earlier_of_regress_and_ok() -> None:
    assert combine({"up": np.int64(10), "below": np.int64(50)}, False) == "regress"
    assert combine({"up": np.int64(60), "below": np.int64(50)}, False) == "ok"
    assert combine({"up": np.int64(0), "below": np.int64(0)}, False) == "undecided"
    # two-sided ok needs both sides
    assert (
        combine({"up": np.int64(0), "below": np.int64(5), "down": np.int64(0), "above": np.int64(0)}, True)
        == "undecided"
    )


def test_distance_is_how_far_the_interval_is_from_clearing_the_floor() -> None:
    assert distance(Interval(low=-0.01, high=0.04), 0.02, False) == pytest.approx(0.02)
    assert distance(Interval(low=None, high=0.04), 0.02, False) is None


@pytest.mark.parametrize("scale", [1.0, 1.15])
def test_vectorised_bulk_first_agrees_with_the_per_tick_decision_at_every_checked_tick(scale: float) -> None:
    old, new = _lat(600, 1.0, 21), _lat(600, scale, 22)
    x, y = log_pairs(old, new)  # the same jitter as bulk_ratio
    first_regress, first_ok = sequential.bulk_first(x[None, :], y[None, :], floor=0.02, alpha=0.01)
    for t in range(25, 601, 25):
        want = bulk_ratio("tpot_ms", old[:t], new[:t], floor=0.02, alpha=0.01).direction
        got = "regress" if first_regress[0] <= t else "ok" if first_ok[0] <= t else "undecided"
        assert got == want, t


def test_vectorised_rate_first_agrees_with_the_per_tick_decision() -> None:
    rng = np.random.default_rng(23)
    a, b = rng.random(3000) < 0.0, rng.random(3000) < 0.02
    first_regress, _ = sequential.rate_first(a[None, :], b[None, :], floor=0.0025, alpha=0.01)
    t = int(first_regress[0])
    assert rate_difference("error", a[:t], b[:t], floor=0.0025, alpha=0.01).direction == "regress"
    assert rate_difference("error", a[: t - 1], b[: t - 1], floor=0.0025, alpha=0.01).direction != "regress"


def test_panel_over_ledger_rows_regresses_on_new_errors_and_says_how_many_requests() -> None:
    rows = []
    for i in range(3000):
        rows.append(row(float(i), "old"))
        bad = i % 20 == 0
        rows.append(
            row(
                i + 0.5,
                "new",
                outcome="error" if bad else "ok",
                status=502 if bad else 200,
                tpot=None if bad else 10.0,
                ttft=None if bad else 50.0,
                tokens=None if bad else 20,
                finish=None if bad else "stop",
            )
        )
    report = judge_rows(rows, JudgeConfig(enabled=True, metrics=["error"]))
    assert report.verdict == "regress"
    (d,) = report.regressions
    assert d.metric == "error" and d.requests_new == 3000 and d.effect == pytest.approx(0.05)


def test_panel_leaves_unmeasured_metrics_out_of_an_ok_verdict() -> None:
    rng = np.random.default_rng(5)
    rows = [
        row(float(i), arm, tpot=float(rng.lognormal(2, 0.1)), ttft=float(rng.lognormal(3, 0.1)))
        for i in range(8000)
        for arm in ("old", "new")
    ]
    report = judge_rows(rows, JudgeConfig(enabled=True, metrics=["tpot_ms", "error", "json_invalid"], tail_floor=0.5))
    assert {d.metric: d.direction for d in report.decisions if d.metric != "json_invalid"} == {
        "tpot_ms": "ok",
        "error": "ok",
    }
    assert report.verdict == "ok"
    assert any("json_invalid" in n for n in report.notes)


def test_verdict_is_undecided_when_any_measured_test_is_undecided() -> None:
    report = judge_rows([row(1.0, "old"), row(2.0, "new")], JudgeConfig(enabled=True, metrics=["tpot_ms"]))
    assert verdict_of(report.decisions) == "undecided"


def test_kayenta_classifies_a_clear_shift_high_and_identical_arms_pass() -> None:
    rng = np.random.default_rng(1)
    base = rng.normal(10, 1, 200)
    assert kayenta.classify(base, rng.normal(11, 1, 200)) == "High"
    assert kayenta.classify(base, base.copy()) == "Pass"
    assert kayenta.classify(base, rng.normal(9, 1, 200), direction="either") == "Low"
    assert kayenta.classify(np.array([]), base) == "Nodata"
    assert kayenta.score({"a": "Pass", "b": "High", "c": "Nodata"}) == 50.0


def test_panel_keeps_at_most_max_pairs_rows_per_arm_and_says_so() -> None:
    rows = [row(float(i), arm) for i in range(300) for arm in ("old", "new")]
    report = judge_rows(rows, JudgeConfig(enabled=True, metrics=["error"], max_pairs=100))
    assert report.decisions[0].requests_new == 100
    assert any("more than 100" in n for n in report.notes)


def test_streams_leave_out_client_outcomes_and_take_no_latency_from_a_fallback_answer() -> None:
    from switchover.rollout.judge.streams import arm_streams

    rows = [
        row(1.0, "new", outcome="bad_request", status=400),
        row(2.0, "new", outcome="fallback_ok", tpot=99.0),
        row(3.0, "new", tpot=7.0),
        row(0.5, "old", tpot=5.0),
    ]
    old, new = arm_streams(rows, 1000)
    assert new.values["error"] == [0.0, 0.0] and new.values["fallback"] == [1.0, 0.0]
    assert new.values["tpot_ms"] == [7.0] and old.values["tpot_ms"] == [5.0]


def test_vectorised_tail_first_agrees_with_the_per_tick_p99_decision() -> None:
    old, new = _lat(2000, 1.0, 31), _lat(2000, 1.0, 32)
    new[new > np.quantile(new, 0.97)] *= 2.0
    first_regress, first_ok = sequential.tail_first(old[None, :], new[None, :], floor=0.10, alpha=0.01, every=100)
    for t in range(100, 2001, 100):
        want = p99_ratio("tpot_ms", old[:t], new[:t], floor=0.10, alpha=0.01).direction
        got = "regress" if first_regress[0] <= t else "ok" if first_ok[0] <= t else "undecided"
        assert got == want, t
    assert first_regress[0] <= 2000


def _tenant_rows(n: int, *, odd_scale: float, new_scale: float) -> list:
    """Old's even-bucket tenants at TPOT x1, its odd-bucket tenants at x odd_scale; new at x new_scale."""
    rng = np.random.default_rng(41)
    rows = []
    for i in range(n):
        bucket = i % 2
        old_tpot = float(rng.lognormal(2.0, 0.1)) * (odd_scale if bucket else 1.0)
        rows.append(row(float(i), "old", tpot=old_tpot).model_copy(update={"bucket": bucket}))
        rows.append(
            row(i + 0.5, "new", tpot=float(rng.lognormal(2.0, 0.1)) * new_scale).model_copy(update={"bucket": 7})
        )
    return rows


def test_a_bulk_regression_is_held_undecided_when_old_s_own_tenant_halves_differ_beyond_the_floor() -> None:
    cfg = JudgeConfig(enabled=True, metrics=["tpot_ms"])
    report = judge_rows(_tenant_rows(600, odd_scale=1.5, new_scale=1.6), cfg)
    (bulk,) = [d for d in report.decisions if d.test == "bulk_ratio"]
    assert bulk.direction == "undecided" and "tenant buckets differ" in bulk.reason


def test_the_tenant_check_lets_a_regression_through_when_old_s_halves_agree() -> None:
    cfg = JudgeConfig(enabled=True, metrics=["tpot_ms"])
    report = judge_rows(_tenant_rows(600, odd_scale=1.0, new_scale=1.3), cfg)
    (bulk,) = [d for d in report.decisions if d.test == "bulk_ratio"]
    assert bulk.direction == "regress" and "tenant" not in bulk.reason
