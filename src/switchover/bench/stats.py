"""The metric formulas (one each, docs/metrics.md), percentiles, goodput and per-step summaries.

Everything here is a pure function of request rows (bench/rows.py); times in rows are perf_counter_ns.
A number that cannot be computed is reported as missing with its reason, never as 0.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from pydantic import BaseModel, Field

from switchover.evidence.bench_step import STEADY_FRACTION, Steady, StepSummary
from switchover.measure import timing
from switchover.measure.timing import NS_PER_MS as NS_PER_MS  # re-exported for bench.recompute

CLIENT_LOAD_LIMIT = 0.7  # above 70% of the calibrated client ceiling a step is not trustworthy

Row = Mapping[str, Any]


@dataclass(slots=True)
class RequestMetrics:
    """Per-request metrics in milliseconds; `missing` maps a metric to why it could not be computed."""

    ok: bool
    ttft_ms: float | None = None
    e2e_ms: float | None = None
    tpot_ms: float | None = None
    ntpot_ms: float | None = None
    itl_ms: list[float] = field(default_factory=list)
    n_out: int | None = None
    missing: dict[str, str] = field(default_factory=dict)


def first_token_ns(row: Row) -> int | None:
    """Arrival of the first event whose text delta is non-empty (measure/timing.py)."""
    return timing.first_token_ns(row.get("chunk_ns") or [], row.get("chunk_text") or [])


def last_chunk_ns(row: Row) -> int | None:
    """Arrival of the last event carrying choices (a token or finish_reason); not usage-only, not [DONE]."""
    return timing.last_event_ns(row.get("chunk_ns") or [])


def request_metrics(row: Row) -> RequestMetrics:
    """TTFT, E2E, TPOT, NTPOT, ITL and N of one request: the formulas of measure/timing.py (docs/metrics.md), and
    why each one that is missing could not be computed."""
    kind = row.get("failure_kind")
    if kind:
        why = f"request failed ({kind})"
        return RequestMetrics(ok=False, missing=dict.fromkeys(("ttft", "e2e", "tpot", "ntpot", "itl", "n"), why))
    m = RequestMetrics(ok=True)
    send = row["send_ns"]
    chunk_ns = row.get("chunk_ns") or []
    first = timing.first_token_index(row.get("chunk_text") or [])
    if first is not None and first >= len(chunk_ns):
        first = None
    n = row.get("completion_tokens")
    m.ttft_ms = timing.ttft_ms(send, None if first is None else int(chunk_ns[first]))
    m.e2e_ms = timing.e2e_ms(send, timing.last_event_ns(chunk_ns))
    if m.ttft_ms is None:
        m.missing["ttft"] = "no streamed event carried text"
    if m.e2e_ms is None:
        m.missing["e2e"] = "no streamed event carried choices"
    if n is None:
        reason = "server sent no usage.completion_tokens"
        m.missing["n"] = reason
        m.missing["tpot"] = reason
        m.missing["ntpot"] = reason
    else:
        m.n_out = int(n)
        m.ntpot_ms = timing.ntpot_ms(m.e2e_ms, m.n_out)
        if m.ntpot_ms is None:
            m.missing["ntpot"] = "N = 0" if m.e2e_ms is not None else m.missing["e2e"]
        m.tpot_ms = timing.tpot_ms(m.ttft_ms, m.e2e_ms, m.n_out)
        if m.n_out < 2:
            m.missing["tpot"] = f"N = {m.n_out} (TPOT needs at least 2 output tokens)"
        elif m.tpot_ms is None:
            m.missing["tpot"] = m.missing.get("ttft") or m.missing.get("e2e") or "no timing"
    m.itl_ms = timing.itl_ms(chunk_ns, first)
    return m


# ---------------------------------------------------------------------------------------------- distributions


# ---------------------------------------------------------------------------------------------- SLOs, goodput


class Slo(BaseModel):
    """Per-request latency objectives (ms); a request is 'good' when it succeeded and meets every one set."""

    ttft_ms: float | None = Field(default=None, gt=0)
    tpot_ms: float | None = Field(default=None, gt=0)
    e2e_ms: float | None = Field(default=None, gt=0)

    def is_empty(self) -> bool:
        return self.ttft_ms is None and self.tpot_ms is None and self.e2e_ms is None


def meets_slo(m: RequestMetrics, slo: Slo) -> bool:
    """True when the request succeeded and every set objective is met; a missing metric does not meet it."""
    if not m.ok:
        return False
    for name in ("ttft_ms", "tpot_ms", "e2e_ms"):
        limit = getattr(slo, name)
        if limit is None:
            continue
        value = getattr(m, name)
        if value is None or value > limit:
            return False
    return True


# ---------------------------------------------------------------------------------------------- steady state


def mean_inflight(intervals: Iterable[tuple[int, int]], start: int, stop: int) -> float | None:
    """Time-weighted mean number of requests in flight over [start, stop] (ns)."""
    if stop <= start:
        return None
    events: list[tuple[int, int]] = []
    for a, b in intervals:
        a, b = max(a, start), min(b, stop)
        if b > a:
            events.append((a, 1))
            events.append((b, -1))
    events.sort()
    area, level, prev = 0, 0, start
    for t, d in events:
        area += level * (t - prev)
        level += d
        prev = t
    return area / (stop - start)


def steady_state(rows: Sequence[Row], concurrency: int | None, rate: float | None) -> Steady:
    """Concurrency mode: time-weighted in-flight between the first and last measured send >= 90% of target.
    Rate mode: measured sends per second over the same window >= 90% of the target rate."""
    measured = sorted(int(r["send_ns"]) for r in rows if not r.get("warmup"))
    if len(measured) < 2:
        return Steady(reached=None, achieved=None, target=concurrency or rate, note="fewer than 2 measured requests")
    start, stop = measured[0], measured[-1]
    if concurrency:
        intervals = [(int(r["send_ns"]), int(r["end_ns"] if r.get("end_ns") is not None else stop)) for r in rows]
        level = mean_inflight(intervals, start, stop)
        if level is None:
            return Steady(reached=None, achieved=None, target=concurrency, note="zero-length window")
        return Steady(reached=level >= STEADY_FRACTION * concurrency, achieved=level, target=concurrency)
    if rate:
        achieved = (len(measured) - 1) / ((stop - start) / 1e9) if stop > start else None
        reached = None if achieved is None else achieved >= STEADY_FRACTION * rate
        return Steady(reached=reached, achieved=achieved, target=rate)
    return Steady(reached=None, achieved=None, target=None, note="no target load (trace replay)")


# ---------------------------------------------------------------------------------------------- step summary


def summarize_step(
    rows: Sequence[Row],
    *,
    slo: Slo | None = None,
    client_ceiling: Mapping[str, float] | None = None,
    labels: Mapping[str, Any] | None = None,
) -> StepSummary:
    """Summarise one step (one endpoint, one load level) from all its rows, exactly; warm-up rows only count
    toward steadiness. The same arithmetic as a run's streaming summary (bench/accumulate.py), with no limit."""
    from switchover.bench.accumulate import StepAccumulator

    acc = StepAccumulator(slo=slo, client_ceiling=client_ceiling, labels=labels, limit=None, itl_limit=None)
    for r in rows:
        acc.add(r)
    return acc.summary()


def metric_samples(rows: Iterable[Row], metric: str) -> list[float]:
    """Per-request values (ms) of `ttft`, `tpot`, `e2e`, `ntpot` or pooled `itl` (measured, ok rows)."""
    out: list[float] = []
    for r in rows:
        if r.get("warmup"):
            continue
        m = request_metrics(r)
        if not m.ok:
            continue
        if metric == "itl":
            out.extend(m.itl_ms)
            continue
        v = getattr(m, f"{metric}_ms")
        if v is not None:
            out.append(v)
    return out
