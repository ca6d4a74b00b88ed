"""Old vs new distribution tests against the A/A noise baseline: no false alarms on identical
distributions at the chosen level, and a shifted distribution is detected."""

from __future__ import annotations

import numpy as np
import pytest

from switchover.rollout.compare import ArmSamples, compare_metric, compare_samples, samples_from_ledger
from tests.rollout.builders import traffic

ALPHA = 0.01
SEEDS = 200
# With a false-alarm rate of at most ALPHA, P(Binomial(200, 0.01) >= 7) < 0.5 %: a count above 6 means the
# test alarms more often than its level allows.
MAX_FALSE_ALARMS = 6


def _lognormal(seed: int, mu: float, n: int = 300) -> np.ndarray:
    return np.random.default_rng(seed).lognormal(mu, 0.5, n)


@pytest.mark.parametrize("metric", ["ttft_ms", "output_tokens"])
def test_identical_continuous_distributions_raise_no_more_alarms_than_alpha(metric: str) -> None:
    alarms = sum(
        compare_metric(metric, _lognormal(s, 3.0), _lognormal(s + 10_000, 3.0), alpha=ALPHA, seed=s).verdict
        == "differs"
        for s in range(SEEDS)
    )
    assert alarms <= MAX_FALSE_ALARMS


def test_identical_categorical_mixes_raise_no_more_alarms_than_alpha() -> None:
    cats, p = ["stop", "length", "tool_calls"], [0.7, 0.25, 0.05]
    alarms = 0
    for s in range(SEEDS):
        rng = np.random.default_rng(s)
        a, b = rng.choice(cats, 300, p=p).tolist(), rng.choice(cats, 300, p=p).tolist()
        alarms += compare_metric("finish_reason", a, b, alpha=ALPHA, seed=s).verdict == "differs"
    assert alarms <= MAX_FALSE_ALARMS


def test_a_shifted_latency_distribution_is_detected() -> None:
    detected = sum(
        compare_metric("ttft_ms", _lognormal(s, 3.0), _lognormal(s + 10_000, 3.25), alpha=ALPHA, seed=s).verdict
        == "differs"
        for s in range(50)
    )
    assert detected >= 48


def test_a_changed_finish_reason_mix_is_detected_and_explained() -> None:
    rng = np.random.default_rng(1)
    old = rng.choice(["stop", "length"], 400, p=[0.9, 0.1]).tolist()
    new = rng.choice(["stop", "length"], 400, p=[0.6, 0.4]).tolist()
    m = compare_metric("finish_reason", old, new, alpha=ALPHA)
    assert m.verdict == "differs" and "chi_square" in m.reason
    assert m.shares_new["length"] > m.shares_old["length"]
    assert m.histogram is not None and m.histogram.categories == ["length", "stop"]


def test_too_few_samples_is_insufficient_not_same() -> None:
    m = compare_metric("ttft_ms", [1.0] * 10, [2.0] * 10, min_samples=50)
    assert m.verdict == "insufficient" and "50" in m.reason


def test_constant_identical_samples_do_not_differ() -> None:
    m = compare_metric("output_tokens", [16.0] * 100, [16.0] * 100)
    assert m.verdict == "same"


def test_histograms_share_bin_edges_and_count_every_sample() -> None:
    m = compare_metric("tpot_ms", _lognormal(1, 2.0), _lognormal(2, 2.0))
    assert m.histogram is not None and m.histogram.edges is not None
    assert sum(m.histogram.old) == 300 and sum(m.histogram.new) == 300
    assert set(m.percentiles_old) == {"p50", "p90", "p99"}


def test_shadow_samples_pair_mirrored_results_with_old_answers() -> None:
    rows = traffic(0.0, 400, new_share=0.0, shadow=True, shadow_ttft_scale=1.6, seed=3)
    old, new = samples_from_ledger(rows, "shadow")
    assert len(old["ttft_ms"]) == len(new["ttft_ms"]) == 400
    report = compare_samples(old, new, mode="shadow")
    assert report.differs == ["ttft_ms"]


def test_arm_samples_count_fallbacks_as_their_own_error_code() -> None:
    rows = traffic(0.0, 200, new_share=0.5, new_outcome="fallback_ok", seed=4)
    old, new = samples_from_ledger(rows, "arms")
    assert set(new["error_code"]) == {"fallback"} and not new["ttft_ms"]
    assert set(old["error_code"]) == {"200"}
    report = compare_samples(old, new, mode="arms", min_samples=20)
    assert "error_code" in report.differs and "ttft_ms" in report.insufficient


def test_arm_samples_skip_client_disconnects() -> None:
    a = ArmSamples()
    rows = traffic(0.0, 10, new_share=0.0)
    rows[0] = rows[0].model_copy(update={"outcome": "client_disconnected"})
    old, _ = samples_from_ledger(rows, "arms")
    assert len(old["error_code"]) == 9 and a["error_code"] == []


def test_output_length_compares_server_counts_only_never_chunk_counts() -> None:
    rows = traffic(0.0, 100, new_share=0.5, seed=5)
    counted = [r.model_copy(update={"tokens_source": "chunks"}) if r.routed == "new" else r for r in rows]
    old, new = samples_from_ledger(counted, "arms")
    assert old["output_tokens"] and not new["output_tokens"]  # chunks are not tokens: that side is not measured


def test_arm_samples_hold_one_list_per_metric_the_comparison_names() -> None:
    from switchover.rollout.compare import CATEGORICAL, CONTINUOUS

    a = ArmSamples()
    a.add(status="200", ok=True, completion_tokens=7, ttft_ms=None, tpot_ms=3.5, finish_reason="length")
    assert list(a.samples) == [*CONTINUOUS, *CATEGORICAL]
    assert a.samples == {
        "output_tokens": [7.0],
        "ttft_ms": [],
        "tpot_ms": [3.5],
        "finish_reason": ["length"],
        "stop_hit": ["no"],
        "error_code": ["200"],
    }


def test_samples_are_bounded_by_a_uniform_reservoir_and_the_report_says_so() -> None:
    old, new = ArmSamples(cap=500), ArmSamples(cap=500)
    for i in range(5000):
        for arm in (old, new):
            arm.add(status="200", ok=True, completion_tokens=10, ttft_ms=float(i), tpot_ms=5.0, finish_reason="stop")
    assert len(old["ttft_ms"]) == 500 and old.seen["ttft_ms"] == 5000
    assert 1500 < sum(old["ttft_ms"]) / 500 < 3500  # a uniform sample of 0..4999, not the first 500 (mean 249.5)
    report = compare_samples(old, new)
    assert any("ttft_ms 500 of 5,000" in n for n in report.notes)
