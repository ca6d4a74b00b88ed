"""A/B significance and SLO checks."""

from __future__ import annotations

import numpy as np
import pytest

from switchover.bench.ab import compare_samples, regression_checks, slo_checks
from switchover.config.bench import BenchSlos
from switchover.evidence.bench_step import StepSummary
from switchover.measure.distribution import Dist


def test_shifted_distribution_is_significant_with_the_right_sign():
    rng = np.random.default_rng(0)
    old = list(10 + rng.standard_normal(200))
    new = list(12 + rng.standard_normal(200))
    d = compare_samples("tpot", old, new, stat="p50", boot=200)
    assert d is not None and d.significant
    assert d.delta_pct == pytest.approx(20, abs=5)
    assert d.ci_low is not None and d.ci_low > 0


def test_same_distribution_is_not_significant():
    rng = np.random.default_rng(3)
    d = compare_samples("tpot", list(rng.standard_normal(200) + 10), list(rng.standard_normal(200) + 10), boot=200)
    assert d is not None and not d.significant


def test_identical_constant_samples_have_no_test():
    d = compare_samples("ttft", [5.0] * 10, [5.0] * 10, boot=10)
    assert d is not None and d.p_value is None and not d.significant


def test_empty_side_gives_no_delta():
    assert compare_samples("ttft", [], [1.0]) is None


def _step(endpoint: str, tpot_p99: float | None, error_rate: float = 0.0) -> StepSummary:
    dist = (
        None
        if tpot_p99 is None
        else Dist(count=10, mean=1, std=0, min=1, max=tpot_p99, p50=1, p90=1, p95=1, p99=tpot_p99)
    )
    return StepSummary(
        endpoint=endpoint,
        step=0,
        concurrency=4,
        requests=10,
        warmup=0,
        ok=10,
        failed=0,
        duration_s=1,
        req_per_s=10,
        out_tok_per_s=100,
        chunks_per_s=100,
        error_rate=error_rate,
        tpot_ms=dist,
    )


def test_slo_checks_pass_fail_and_not_measured():
    checks = slo_checks(
        [_step("old", 40), _step("new", 60), _step("x", None)], BenchSlos(tpot_p99_ms=50, max_error_rate=0.1)
    )
    by = {(c.endpoint, c.name): c for c in checks}
    assert by[("old", "tpot_p99_ms")].passed
    assert not by[("new", "tpot_p99_ms")].passed
    assert not by[("x", "tpot_p99_ms")].passed and by[("x", "tpot_p99_ms")].note == "not measured"
    assert by[("old", "max_error_rate")].passed


def test_regression_fails_only_when_significant_and_over_the_limit():
    rng = np.random.default_rng(0)
    worse = compare_samples(
        "tpot", list(10 + rng.standard_normal(300)), list(15 + rng.standard_normal(300)), stat="p99", boot=100
    )
    assert worse is not None
    checks = regression_checks([(0, 4, worse)], BenchSlos(max_regression_pct=10))
    assert len(checks) == 1 and not checks[0].passed
    assert regression_checks([(0, 4, worse)], BenchSlos(max_regression_pct=90))[0].passed
    assert regression_checks([(0, 4, worse)], BenchSlos()) == []
