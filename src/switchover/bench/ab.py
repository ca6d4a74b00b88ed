"""A/B comparison of two endpoints on the same seeded workload: per-step, per-metric deltas with a
significance test (Mann-Whitney U on the per-request samples; a bootstrap CI for the percentile delta) and
pass/fail checks against the SLOs of switchover.yaml."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
from scipy import stats as sps

from switchover.config.bench import BenchSlos
from switchover.evidence.bench_findings import MetricDelta, SloCheck
from switchover.evidence.bench_step import StepSummary
from switchover.measure.percentiles import percentile


def _stat(a: np.ndarray, stat: str) -> float:
    if stat == "mean":
        return float(a.mean())
    return percentile(a, float(stat.lstrip("p")))


def compare_samples(
    metric: str,
    old: Sequence[float],
    new: Sequence[float],
    *,
    stat: str = "p99",
    alpha: float = 0.05,
    boot: int = 500,
    seed: int = 0,
) -> MetricDelta | None:
    """Delta of `stat` between two sample sets, Mann-Whitney U p-value, and a bootstrap CI of the delta."""
    if len(old) == 0 or len(new) == 0:
        return None
    a, b = np.asarray(old, float), np.asarray(new, float)
    so, sn = _stat(a, stat), _stat(b, stat)
    p_value: float | None = None
    if len(a) >= 2 and len(b) >= 2 and not (np.all(a == a[0]) and np.all(b == a[0])):
        p_value = float(sps.mannwhitneyu(a, b, alternative="two-sided").pvalue)
    rng = np.random.default_rng(seed)
    deltas = [
        _stat(rng.choice(b, b.size, replace=True), stat) - _stat(rng.choice(a, a.size, replace=True), stat)
        for _ in range(boot)
    ]
    lo, hi = (float(np.percentile(deltas, 2.5)), float(np.percentile(deltas, 97.5))) if deltas else (None, None)
    ci_excludes_zero = lo is not None and hi is not None and (lo > 0 or hi < 0)
    significant = p_value is not None and p_value < alpha and ci_excludes_zero
    return MetricDelta(
        metric=metric,
        stat=stat,
        old=so,
        new=sn,
        delta_pct=(sn / so - 1) * 100 if so else None,
        p_value=p_value,
        ci_low=lo,
        ci_high=hi,
        significant=significant,
        n_old=a.size,
        n_new=b.size,
    )


def slo_checks(steps: Sequence[StepSummary], slos: BenchSlos) -> list[SloCheck]:
    """Every step of every endpoint against the absolute limits (p99s, error rate)."""
    out: list[SloCheck] = []
    limits = [("ttft_p99_ms", "ttft_ms"), ("tpot_p99_ms", "tpot_ms"), ("e2e_p99_ms", "e2e_ms")]
    for s in steps:
        for name, attr in limits:
            limit = getattr(slos, name)
            if limit is None:
                continue
            dist = getattr(s, attr)
            value = dist.p99 if dist is not None else None
            out.append(
                SloCheck(
                    name=name,
                    endpoint=s.endpoint,
                    step=s.step,
                    concurrency=s.concurrency or s.rate,
                    value=value,
                    limit=limit,
                    passed=value is not None and value <= limit,
                    note="" if value is not None else "not measured",
                )
            )
        if slos.max_error_rate is not None:
            out.append(
                SloCheck(
                    name="max_error_rate",
                    endpoint=s.endpoint,
                    step=s.step,
                    concurrency=s.concurrency or s.rate,
                    value=s.error_rate,
                    limit=slos.max_error_rate,
                    passed=s.error_rate is not None and s.error_rate <= slos.max_error_rate,
                )
            )
    return out


def regression_checks(deltas: Sequence[tuple[int, int | float | None, MetricDelta]], slos: BenchSlos) -> list[SloCheck]:
    """New worse than old by more than max_regression_pct on a significant p99 delta fails."""
    if slos.max_regression_pct is None:
        return []
    out = []
    for step, conc, d in deltas:
        if d.stat != "p99" or d.delta_pct is None:
            continue
        bad = d.significant and d.delta_pct > slos.max_regression_pct
        out.append(
            SloCheck(
                name=f"regression {d.metric} p99",
                endpoint="new",
                step=step,
                concurrency=conc,
                value=d.delta_pct,
                limit=slos.max_regression_pct,
                passed=not bad,
                note=f"p={d.p_value:.3g}" if d.p_value is not None else "no test",
            )
        )
    return out
