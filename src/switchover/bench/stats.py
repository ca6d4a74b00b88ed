"""The metric formulas (one each, docs/metrics.md), percentiles, goodput and per-step summaries.

Everything here is a pure function of request rows (bench/rows.py); times in rows are perf_counter_ns.
A number that cannot be computed is reported as missing with its reason, never as 0.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Annotated, Any, Literal

import numpy as np
from pydantic import BaseModel, Field

from switchover.measure import timing
from switchover.measure.timing import NS_PER_MS as NS_PER_MS  # re-exported for bench.recompute

PERCENTILES = (50, 90, 95, 99)
STEADY_FRACTION = 0.9  # a step is steady when it held >= 90% of its target concurrency (or rate)
CLIENT_LOAD_LIMIT = 0.7  # above 70% of the calibrated client ceiling a step is not trustworthy

Row = Mapping[str, Any]

# the labels that place a step in a run: its summary, its start and end, its A/B comparison
EndpointLabel = Annotated[str, Field(description="The endpoint's label (old, new, ...: the plan's endpoints)")]
StepIndex = Annotated[
    int, Field(description="The load level: its index in the plan's concurrency (or rates) list; 0 for a trace")
]
RepeatIndex = Annotated[int, Field(description="Which repetition of the step (0 up to the plan's repeats - 1)")]
BucketLabel = Annotated[
    str | None,
    Field(description="The input-length bucket: its target prompt tokens (one of the plan's buckets), or 'dataset'"),
]


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


class Dist(BaseModel):
    """Summary of one metric over a step's requests (percentiles: numpy linear interpolation, as vLLM)."""

    count: int
    mean: float
    std: float  # population std (ddof=0), as vLLM and SGLang print
    min: float
    max: float
    p50: float
    p90: float
    p95: float
    p99: float
    quantiles: Literal["exact", "sketch"] = Field(
        default="exact",
        description="exact: numpy over every value; sketch: a DDSketch (relative error 0.5%), for "
        "steps with more values than the exact limit (bench/samples.py)",
    )

    def get(self, stat: str) -> float:
        return float(getattr(self, stat))


def describe(values: Sequence[float] | np.ndarray) -> Dist | None:
    """count/mean/std/min/max/p50/p90/p95/p99; None for no values."""
    if len(values) == 0:
        return None
    a = np.asarray(values, dtype=float)
    p = np.percentile(a, PERCENTILES)
    return Dist(
        count=int(a.size),
        mean=float(a.mean()),
        std=float(a.std()),
        min=float(a.min()),
        max=float(a.max()),
        p50=float(p[0]),
        p90=float(p[1]),
        p95=float(p[2]),
        p99=float(p[3]),
    )


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


class Steady(BaseModel):
    """Whether the step held its target load while it measured."""

    reached: bool | None
    achieved: float | None = Field(description="Mean in-flight requests (concurrency mode) or sent req/s (rate mode)")
    target: float | None
    note: str = ""


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


class LengthCheck(BaseModel):
    """Achieved vs wanted token counts (ISL from usage.prompt_tokens; N vs re-tokenized and max_tokens)."""

    isl_target: int | None = None
    isl_mean: float | None = None
    isl_min: int | None = None
    isl_max: int | None = None
    isl_off_by_more_than_1: int = 0
    isl_unreported: int = 0
    osl_target: int | None = None
    n_below_target: int = 0
    n_above_target: int = 0
    n_usage_missing: int = 0
    retok_compared: int = 0
    retok_mismatch: int = 0
    retok_mean_abs_diff: float | None = None


class WorkerLoad(BaseModel):
    """One worker process's share of a multi-process step: its target and what it achieved."""

    worker: int
    target: float | None = Field(description="its streams (concurrency mode) or req/s (rate mode)")
    achieved: float | None
    reached: bool | None
    requests: int
    failed: int
    stopped: str | None = None


class StepSummary(BaseModel):
    """Everything measured in one step of one endpoint (latencies in ms)."""

    endpoint: EndpointLabel
    step: StepIndex
    repeat: RepeatIndex = 0
    concurrency: int | None = Field(
        default=None, description="Requests kept in flight (concurrency mode); None in rate or trace mode"
    )
    rate: float | None = Field(default=None, description="Target arrival rate, req/s (rate mode); None otherwise")
    bucket: BucketLabel = None
    requests: int = Field(description="Measured requests (warm-up excluded)")
    warmup: int = Field(description="Warm-up requests (not measured)")
    ok: int
    failed: int
    duration_s: float | None = Field(
        description="From the first measured send to the last end, s (a resumed step's outage left out); None: no span"
    )
    req_per_s: float | None = Field(description="Successful requests / duration_s")
    out_tok_per_s: float | None = Field(
        description="Output tokens (N) of the successful requests / duration_s; None unless every one of them has N"
    )
    chunks_per_s: float | None = Field(
        description="Events carrying choices received by the successful requests / duration_s"
    )
    goodput_req_per_s: float | None = Field(
        default=None, description="Requests meeting every SLO / duration_s; None without SLOs"
    )
    slo_attainment: float | None = Field(
        default=None, description="Share of the measured requests meeting every SLO; None without SLOs"
    )
    error_rate: float | None = Field(description="failed / requests; None: no measured request")
    errors: dict[str, int] = Field(default_factory=dict, description="Failed requests by failure kind")
    ttft_ms: Dist | None = None
    tpot_ms: Dist | None = None
    itl_ms: Dist | None = None
    e2e_ms: Dist | None = None
    ntpot_ms: Dist | None = None
    missing: dict[str, dict[str, int]] = Field(default_factory=dict, description="metric -> reason -> requests")
    lengths: LengthCheck = Field(default_factory=LengthCheck)
    steady: Steady | None = None
    one_read: int = Field(
        default=0,
        description="Successful requests (N > 1) whose tokens all arrived in one read: "
        "TPOT 0 and TTFT = E2E (the server flushed them together, or the client read late)",
    )
    itl_zero: int = Field(
        default=0,
        description="ITL gaps of 0: events that arrived in the same read (coalesced by the server or the network); "
        "they pull the ITL percentiles down, so the step says how many of `itl_ms.count` they are",
    )
    workers: list[WorkerLoad] = Field(default_factory=list, description="bench --workers: each process's load")
    client_load: float | None = Field(default=None, description="Share of the calibrated client ceiling used")
    client_flag: bool = False


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
