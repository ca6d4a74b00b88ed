"""The knee sets the canary ceiling and the timeouts: new's measured knee (bench/knee.py in a bench run's
summary.json) turned into a weight cap and into client and gateway timeouts (docs/rollout.md, the canary ceiling
and timeouts from the knee).

Weight cap: the canary sends `weight` % of the service's peak load to new, so new must hold weight × peak below its
knee: cap = floor(100 × knee / peak), with the knee's bootstrap CI low end when there is one (the cautious side).
A ladder that never bent gives only a lower bound on new's capacity (its top step), said as such.
Timeouts, at the load the cap allows (the knee step): client = E2E p99 × (1 + margin); the gateway's fallback
to old (gateway.fallback.on_timeout_ms) = TTFT p99 × (1 + margin); its idle limit (timeouts.idle_ms) =
ITL p99 × (1 + margin), at least MIN_IDLE_MS.
"""

from __future__ import annotations

import math
from pathlib import Path

from pydantic import BaseModel, Field, ValidationError

from switchover.errors import BadInput
from switchover.evidence.bench import SUMMARY_MAX_BYTES, BenchReport
from switchover.evidence.bench_step import StepSummary
from switchover.textfile import load_json

MIN_IDLE_MS = 1000.0  # a gap shorter than a second between two reads is scheduling noise, not a stall


class KneeLimits(BaseModel):
    """`plan limits`: the weight cap and the timeouts new's knee allows."""

    bench: str = Field(description="The bench run directory read")
    endpoint: str
    bucket: str | None
    metric: str = Field(description="The knee's metric, e.g. tpot p99")
    unit: str = Field(description="concurrency (requests in flight) or req/s (rate ladder): the unit of every load")
    knee_found: bool = Field(description="False: the curve did not bend within the ladder; the load is a lower bound")
    knee: float | None = Field(default=None, description="The fitted knee")
    knee_ci_low: float | None = Field(default=None, description="Low end of its bootstrap CI")
    capacity: float = Field(description="The load the cap and timeouts use: CI low, else the knee, else the top step")
    step_load: float = Field(description="The ladder step whose latencies set the timeouts (at or below capacity)")
    peak: float | None = Field(default=None, description="The service's peak load, as given (--peak)")
    weight_cap_percent: int | None = Field(
        default=None, description="At most this % of traffic to new; None without --peak"
    )
    margin: float
    e2e_p99_ms: float | None = None
    ttft_p99_ms: float | None = None
    itl_p99_ms: float | None = None
    client_timeout_s: float | None = Field(default=None, description="E2E p99 × (1 + margin), rounded up")
    fallback_on_timeout_ms: float | None = Field(
        default=None, description="gateway.fallback.on_timeout_ms: TTFT p99 × (1 + margin)"
    )
    idle_ms: float | None = Field(default=None, description="gateway.timeouts.idle_ms: ITL p99 × (1 + margin)")
    planned_weight: float | None = Field(default=None, description="--weight, the canary weight planned")
    notes: list[str] = Field(default_factory=list)

    @property
    def over_cap(self) -> bool:
        cap = self.weight_cap_percent
        return self.planned_weight is not None and cap is not None and self.planned_weight > cap


def _load(s: StepSummary) -> float | None:
    return float(s.concurrency) if s.concurrency is not None else s.rate


def _p99(steps: list[StepSummary], attr: str) -> float | None:
    values = [d.p99 for s in steps if (d := getattr(s, attr)) is not None]
    return max(values) if values else None  # over repeats: the worst


def limits(
    report: BenchReport,
    bench: str,
    *,
    endpoint: str = "new",
    bucket: str | None = None,
    peak: float | None = None,
    margin: float = 0.5,
    planned_weight: float | None = None,
) -> KneeLimits:
    """The weight cap and timeouts from `endpoint`'s knee in `bucket` (the only one measured when None)."""
    keys = [k for k in report.knees if k.split("/", 1)[0] == endpoint]
    if not keys:
        have = sorted({k.split("/", 1)[0] for k in report.knees}) or ["none"]
        raise BadInput(f"--endpoint {endpoint!r}: the bench has no knee for it (endpoints with one: {', '.join(have)})")
    buckets = [k.split("/", 1)[1] for k in keys]
    if bucket is None and len(buckets) > 1:
        raise BadInput(f"the bench measured buckets {', '.join(buckets)}; name one with --bucket")
    chosen = bucket if bucket is not None else buckets[0]
    if chosen not in buckets:
        raise BadInput(f"--bucket {chosen!r}: not measured for {endpoint} (buckets: {', '.join(buckets)})")
    knee = report.knees[f"{endpoint}/{chosen}"]
    steps = [s for s in report.steps if s.endpoint == endpoint and str(s.bucket) == chosen and _load(s) is not None]
    if not steps:
        raise BadInput(f"the bench has no step of {endpoint} in bucket {chosen} with a load")
    unit = "concurrency" if steps[0].concurrency is not None else "req/s"
    loads = sorted({x for s in steps if (x := _load(s)) is not None})
    notes = []
    if knee.found and knee.concurrency is not None:
        capacity = knee.ci_low if knee.ci_low is not None else knee.concurrency
        notes.append(
            f"capacity = the knee's {'CI low end' if knee.ci_low is not None else 'fit'} {capacity:g} "
            f"{unit} ({knee.metric})"
        )
    else:
        capacity = loads[-1]
        notes.append(
            f"no knee within the ladder ({knee.message}): new holds at least {capacity:g} {unit}, the top "
            "step; the cap is a lower bound — extend the ladder to find the knee"
        )
    step_load = max([x for x in loads if x <= capacity] or [loads[0]])
    at = [s for s in steps if _load(s) == step_load]
    e2e, ttft, itl = _p99(at, "e2e_ms"), _p99(at, "ttft_ms"), _p99(at, "itl_ms")
    grow = 1 + margin
    cap = None if peak is None else min(100, math.floor(100 * capacity / peak))
    if peak is None:
        notes.append("no --peak: the weight cap needs the service's peak load in the same unit")
    if e2e is None:
        notes.append(f"E2E p99 not measured at {step_load:g} {unit}: no client timeout")
    return KneeLimits(
        bench=bench,
        endpoint=endpoint,
        bucket=chosen,
        metric=knee.metric,
        unit=unit,
        knee_found=knee.found,
        knee=knee.concurrency,
        knee_ci_low=knee.ci_low,
        capacity=capacity,
        step_load=step_load,
        peak=peak,
        weight_cap_percent=cap,
        margin=margin,
        e2e_p99_ms=e2e,
        ttft_p99_ms=ttft,
        itl_p99_ms=itl,
        client_timeout_s=math.ceil(e2e * grow / 1000) if e2e is not None else None,
        fallback_on_timeout_ms=math.ceil(ttft * grow) if ttft is not None else None,
        idle_ms=max(MIN_IDLE_MS, math.ceil(itl * grow)) if itl is not None else None,
        planned_weight=planned_weight,
        notes=notes,
    )


def read_bench(path: Path) -> BenchReport:
    """A bench run directory's summary.json (BadInput when missing or not one)."""
    file = path / "summary.json" if path.is_dir() else path
    data = load_json(file, max_bytes=SUMMARY_MAX_BYTES, what="bench summary.json")
    try:
        return BenchReport.model_validate(data)
    except ValidationError as exc:
        raise BadInput(
            f"{file}: not a bench summary.json ({exc.error_count()} problems, first at "
            f"{'.'.join(str(p) for p in exc.errors()[0]['loc'])})"
        ) from None
