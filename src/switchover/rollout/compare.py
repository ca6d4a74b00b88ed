"""Old against new (or shadow), metric by metric, against an A/A noise baseline.

For each metric the same tests run twice: old vs new, and old vs old (old split at random into two halves,
several times). A difference counts only if it is significant (p < alpha, Bonferroni within the metric) AND
its n-independent statistic exceeds `noise_margin` times the largest one the A/A splits produced: the idea
behind Diffy's primary/secondary noise, applied to distributions (not bytes) as Kayenta does.

n-independent statistics (their null distribution does not depend on sample size, so halves of old and
old-vs-new are comparable): KS  D·sqrt(nm/(n+m)); Mann-Whitney |U − nm/2| / sqrt(nm(n+m+1)/12); chi-square
statistic of the 2×k table (rare categories merged so every expected count is ≥ 5 where possible).
"""

from __future__ import annotations

import math
import random
from collections import Counter
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

import numpy as np
from pydantic import BaseModel, Field
from scipy import stats

from switchover.ledger_record import NOT_AN_ARM_OUTCOMES, LedgerRecord, LedgerRow, ShadowRecord, ShadowResult
from switchover.measure.distribution import describe

Verdict = Literal["same", "differs", "insufficient"]
TestName = Literal["ks", "mann_whitney", "chi_square"]
CONTINUOUS = ("output_tokens", "ttft_ms", "tpot_ms")
CATEGORICAL = ("finish_reason", "stop_hit", "error_code")
RARE = "(rare)"


MAX_SAMPLES = 100_000
"""Observations kept per metric and arm; beyond it a uniform reservoir (a KS test at this n resolves differences
far below the A/A noise margin, and memory stays flat however long the ledger)."""


@dataclass
class ArmSamples:
    """Per-request observations of one arm (or of the shadow): `samples[metric]` for every metric named in
    CONTINUOUS (numbers) and CATEGORICAL (labels: stop_hit is "yes" | "no" per finished request, error_code "200",
    "500", "timeout", ... per request)."""

    samples: dict[str, list[Any]] = field(default_factory=lambda: {m: [] for m in CONTINUOUS + CATEGORICAL})
    cap: int = MAX_SAMPLES
    seen: Counter[str] = field(default_factory=Counter)  # observations offered per metric (kept: at most `cap`)
    _rng: random.Random = field(default_factory=lambda: random.Random(0), repr=False)

    def __getitem__(self, metric: str) -> list[Any]:
        return self.samples[metric]

    def put(self, metric: str, value: Any) -> None:
        """Keep `value`: every one up to `cap`, then a uniform reservoir of `cap` (memory flat over any ledger)."""
        self.seen[metric] += 1
        kept = self.samples[metric]
        if len(kept) < self.cap:
            kept.append(value)
            return
        j = self._rng.randrange(self.seen[metric])
        if j < self.cap:
            kept[j] = value

    def sampled_note(self, arm: str) -> str | None:
        """Which metrics hold a uniform sample rather than every observation, or None."""
        over = {m: n for m, n in self.seen.items() if n > self.cap}
        if not over:
            return None
        said = ", ".join(f"{m} {self.cap:,} of {n:,}" for m, n in sorted(over.items()))
        return f"{arm}: a uniform random sample was compared, not every request ({said})"

    def add(
        self,
        *,
        status: str,
        ok: bool,
        completion_tokens: int | None,
        ttft_ms: float | None,
        tpot_ms: float | None,
        finish_reason: str | None,
    ) -> None:
        self.put("error_code", status)
        if not ok:
            return
        for metric, value in (("output_tokens", completion_tokens), ("ttft_ms", ttft_ms), ("tpot_ms", tpot_ms)):
            if value is not None:
                self.put(metric, float(value))
        if finish_reason is not None:
            self.put("finish_reason", finish_reason)
            self.put("stop_hit", "yes" if finish_reason == "stop" else "no")


class TestResult(BaseModel):
    """One statistical test, old vs new, next to the same test on old vs old."""

    test: TestName
    statistic: float
    p_value: float
    scaled: float = Field(description="n-independent statistic, old vs new")
    noise: float = Field(description="largest n-independent statistic over the A/A splits of old")
    beyond_noise: bool


class Histogram(BaseModel):
    """Counts per bin (continuous) or per category (categorical), for plots."""

    edges: list[float] | None = None
    categories: list[str] | None = None
    old: list[int]
    new: list[int]


class MetricComparison(BaseModel):
    metric: str
    kind: Literal["continuous", "categorical"]
    verdict: Verdict
    reason: str
    n_old: int
    n_new: int
    tests: list[TestResult] = Field(default_factory=list)
    percentiles_old: dict[str, float] = Field(default_factory=dict)
    percentiles_new: dict[str, float] = Field(default_factory=dict)
    shares_old: dict[str, float] = Field(default_factory=dict)
    shares_new: dict[str, float] = Field(default_factory=dict)
    histogram: Histogram | None = None


class ComparisonReport(BaseModel):
    """Per-metric verdicts; `differs` lists the metrics whose difference is beyond the A/A noise."""

    mode: Literal["shadow", "arms", "samples"]
    alpha: float
    noise_margin: float
    splits: int
    min_samples: int
    metrics: list[MetricComparison]
    ledger_bad_lines: int = Field(default=0, description="Ledger lines that could not be read and were skipped")
    notes: list[str] = Field(default_factory=list)

    @property
    def differs(self) -> list[str]:
        return [m.metric for m in self.metrics if m.verdict == "differs"]

    @property
    def insufficient(self) -> list[str]:
        return [m.metric for m in self.metrics if m.verdict == "insufficient"]


def _ks_scaled(a: np.ndarray, b: np.ndarray) -> tuple[float, float, float]:
    n, m = len(a), len(b)
    # the p-value from the asymptotic Kolmogorov distribution, always: scipy's default ("auto") tries the exact one
    # up to 10,000 per side and, when that computation fails (ties, some sizes), switches method with only a
    # RuntimeWarning, so the same comparison could use either. Comparisons need min_samples (default 50) per side, where
    # the asymptotic p-value is the usual one; the A/A noise uses the statistic alone.
    res = stats.ks_2samp(a, b, method="asymp")
    return float(res.statistic), float(res.pvalue), float(res.statistic) * math.sqrt(n * m / (n + m))


def _mw_scaled(a: np.ndarray, b: np.ndarray) -> tuple[float, float, float]:
    n, m = len(a), len(b)
    if np.all(a == a[0]) and np.all(b == a[0]):
        return float(n * m / 2), 1.0, 0.0
    res = stats.mannwhitneyu(a, b, alternative="two-sided")
    sd = math.sqrt(n * m * (n + m + 1) / 12)
    return float(res.statistic), float(res.pvalue), abs(float(res.statistic) - n * m / 2) / sd


def _table(a: Sequence[str], b: Sequence[str]) -> tuple[list[str], np.ndarray]:
    """2×k contingency table; categories too rare for chi-square (expected < 5) are merged."""
    ca, cb = Counter(a), Counter(b)
    total = Counter(a) + Counter(b)
    n = len(a) + len(b)
    share = min(len(a), len(b)) / n if n else 0
    keep = sorted(c for c, k in total.items() if k * share >= 5)
    rare = [c for c in total if c not in keep]
    cats = keep + ([RARE] if rare else [])
    rows = [
        [ca[c] for c in keep] + ([sum(ca[c] for c in rare)] if rare else []),
        [cb[c] for c in keep] + ([sum(cb[c] for c in rare)] if rare else []),
    ]
    return cats, np.array(rows, dtype=float)


def _chi_scaled(a: Sequence[str], b: Sequence[str]) -> tuple[float, float, float]:
    _, table = _table(a, b)
    table = table[:, table.sum(axis=0) > 0]
    if table.shape[1] < 2:
        return 0.0, 1.0, 0.0
    chi2, p, _, _ = stats.chi2_contingency(table, correction=False)
    return float(chi2), float(p), float(chi2)


def _percentiles(x: np.ndarray) -> dict[str, float]:
    d = describe(x)
    return {} if d is None else {"p50": d.p50, "p90": d.p90, "p99": d.p99}


def _shares(x: Sequence[str]) -> dict[str, float]:
    c = Counter(x)
    n = len(x)
    return {k: v / n for k, v in sorted(c.items())} if n else {}


def _histogram(a: np.ndarray, b: np.ndarray, max_bins: int = 30) -> Histogram:
    both = np.concatenate([a, b])
    edges = np.histogram_bin_edges(both, bins="auto")
    if len(edges) - 1 > max_bins:
        edges = np.histogram_bin_edges(both, bins=max_bins)
    return Histogram(
        edges=[float(e) for e in edges], old=np.histogram(a, edges)[0].tolist(), new=np.histogram(b, edges)[0].tolist()
    )


def _splits(n: int, splits: int, rng: np.random.Generator) -> Iterable[tuple[np.ndarray, np.ndarray]]:
    for _ in range(splits):
        perm = rng.permutation(n)
        yield perm[: n // 2], perm[n // 2 :]


def compare_metric(
    metric: str,
    old: Sequence[float] | Sequence[str],
    new: Sequence[float] | Sequence[str],
    *,
    alpha: float = 0.01,
    noise_margin: float = 1.5,
    min_samples: int = 50,
    splits: int = 10,
    seed: int = 0,
) -> MetricComparison:
    """One metric, old vs new: KS + Mann-Whitney (continuous) or chi-square (categorical), vs A/A noise."""
    kind: Literal["continuous", "categorical"] = "categorical" if metric in CATEGORICAL else "continuous"
    n_old, n_new = len(old), len(new)
    base: dict[str, Any] = dict(metric=metric, kind=kind, n_old=n_old, n_new=n_new)
    if kind == "continuous":
        a, b = np.asarray(old, dtype=float), np.asarray(new, dtype=float)
        base.update(percentiles_old=_percentiles(a), percentiles_new=_percentiles(b))
        if n_old and n_new:
            base["histogram"] = _histogram(a, b)
    else:
        sa, sb = [str(x) for x in old], [str(x) for x in new]
        base.update(shares_old=_shares(sa), shares_new=_shares(sb))
        cats = sorted(set(sa) | set(sb))
        base["histogram"] = Histogram(categories=cats, old=[sa.count(c) for c in cats], new=[sb.count(c) for c in cats])
    if n_old < min_samples or n_new < min_samples:
        return MetricComparison(
            **base,
            verdict="insufficient",
            reason=f"needs {min_samples} samples per side, has old {n_old} / new {n_new}",
        )
    rng = np.random.default_rng(seed)
    tests: dict[TestName, Callable[[Any, Any], tuple[float, float, float]]]
    if kind == "continuous":
        tests = {"ks": _ks_scaled, "mann_whitney": _mw_scaled}
        x, y = a, b
    else:
        tests = {"chi_square": _chi_scaled}
        x, y = np.asarray(sa, dtype=object), np.asarray(sb, dtype=object)
    noise = {name: 0.0 for name in tests}
    for i, j in _splits(n_old, splits, rng):
        for name, fn in tests.items():
            noise[name] = max(noise[name], fn(x[i], x[j])[2])
    alpha_each = alpha / len(tests)
    results = []
    for name, fn in tests.items():
        statistic, p, scaled = fn(x, y)
        beyond = p < alpha_each and scaled > noise_margin * noise[name]
        results.append(
            TestResult(test=name, statistic=statistic, p_value=p, scaled=scaled, noise=noise[name], beyond_noise=beyond)
        )
    hits = [r for r in results if r.beyond_noise]
    if hits:
        worst = max(hits, key=lambda r: r.scaled / max(r.noise, 1e-12))
        reason = (
            f"{worst.test}: p={worst.p_value:.2g} < {alpha_each:.2g} and statistic {worst.scaled:.2f} > "
            f"{noise_margin:g} × A/A noise {worst.noise:.2f}"
        )
        return MetricComparison(**base, verdict="differs", reason=reason, tests=results)
    return MetricComparison(**base, verdict="same", tests=results, reason="no test beyond both alpha and the A/A noise")


def compare_samples(
    old: ArmSamples,
    new: ArmSamples,
    *,
    mode: Literal["shadow", "arms", "samples"] = "samples",
    alpha: float = 0.01,
    noise_margin: float = 1.5,
    min_samples: int = 50,
    splits: int = 10,
    seed: int = 0,
    metrics: Sequence[str] = CONTINUOUS + CATEGORICAL,
) -> ComparisonReport:
    """Every metric of two arms."""
    out = [
        compare_metric(
            m,
            old[m],
            new[m],
            alpha=alpha,
            noise_margin=noise_margin,
            min_samples=min_samples,
            splits=splits,
            seed=seed + k,
        )
        for k, m in enumerate(metrics)
    ]
    notes = [n for n in (old.sampled_note("old"), new.sampled_note("new")) if n]
    return ComparisonReport(
        mode=mode,
        alpha=alpha,
        noise_margin=noise_margin,
        splits=splits,
        min_samples=min_samples,
        metrics=out,
        notes=notes,
    )


def _status_label(status: int | None, error: str | None = None) -> str:
    if status:
        return str(status)
    return error.split(":", 1)[0].strip()[:40] if error else "no_status"


def _add_pair(old: ArmSamples, new: ArmSamples, primary: LedgerRecord | ShadowRecord, s: ShadowResult) -> None:
    """The primary's answer on the old side, its mirror's on the new side."""
    # output length compares only the servers' own counts: a count of chunks is another quantity
    old.add(
        status=_status_label(primary.status),
        ok=primary.outcome == "ok",
        completion_tokens=primary.completion_tokens if primary.tokens_source == "usage" else None,
        ttft_ms=primary.ttft_ms,
        tpot_ms=primary.tpot_ms,
        finish_reason=primary.finish_reason,
    )
    shadow_ok = s.error is None and s.status is not None and 200 <= s.status < 300
    new.add(
        status=_status_label(s.status, s.error),
        ok=shadow_ok,
        completion_tokens=s.completion_tokens,
        ttft_ms=s.ttft_ms,
        tpot_ms=s.tpot_ms,
        finish_reason=s.finish_reason,
    )


def samples_from_ledger(records: Iterable[LedgerRow], mode: Literal["shadow", "arms"]) -> tuple[ArmSamples, ArmSamples]:
    """Old and new samples: `shadow` pairs each mirrored request with its primary (old) answer, from shadow
    rows and from request rows of older ledgers that embed `shadow`; `arms` groups request rows by the arm
    the policy routed them to. Outcomes that say nothing about an arm (client mistakes, disconnects, drain
    cut-offs, gateway errors) are left out of both."""
    old, new = ArmSamples(), ArmSamples()
    if mode == "shadow":
        # one pass, holding no row: a shadow row pairs its request with its mirror; so does a legacy request row
        # (older gateways embedded the mirror's result). A request with both (a ledger that spans an upgrade) is
        # paired once: only the request ids are kept for that check, not the rows.
        mirrored: set[str] = set()
        embedded: set[str] = set()
        for r in records:
            if isinstance(r, ShadowRecord):
                first = r.request_id not in embedded
                mirrored.add(r.request_id)
            else:
                first = r.request_id not in mirrored
            s = r.shadow
            if s is None or not first or s.dropped or r.routed != "old" or r.outcome in NOT_AN_ARM_OUTCOMES:
                continue
            if isinstance(r, LedgerRecord):
                embedded.add(r.request_id)
            _add_pair(old, new, r, s)
        return old, new
    for r in records:  # one pass: a stream will do
        if not isinstance(r, LedgerRecord) or r.routed is None or r.outcome in NOT_AN_ARM_OUTCOMES:
            continue
        side = new if r.routed == "new" else old
        status = "fallback" if r.outcome == "fallback_ok" else _status_label(r.status)
        if r.outcome == "failed_mid_stream":
            status = "mid_stream"
        side.add(
            status=status,
            ok=r.outcome == "ok" and r.arm == r.routed,
            completion_tokens=r.completion_tokens if r.tokens_source == "usage" else None,
            ttft_ms=r.ttft_ms,
            tpot_ms=r.tpot_ms,
            finish_reason=r.finish_reason,
        )
    return old, new
