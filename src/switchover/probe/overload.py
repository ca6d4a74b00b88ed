"""Overload behaviour (seed 000 §1, 请求调度: "拒绝还是等待"): past its concurrency limit, does an engine reject
(429 / 503) or make requests wait, and from which concurrency on?

Concurrency doubles from 1 up to a bound; at each level a wave of `concurrency × waves` streamed requests is sent
with at most `concurrency` in flight (each bounded by a timeout; the whole probe by a request count). Per level:
statuses, TTFT and TPOT percentiles, and the engine's own waiting-requests gauge (its profile's `waiting` metric,
scraped while the level runs) where it has one. The verdict:
- `rejects` from the first level where any request got 429 or 503 (or the engine's profile says overload status);
- `queues` from the first level where requests were seen waiting (the gauge above 0), or, without a gauge, where
  TTFT p50 grew to `queue_factor` × its value at concurrency 1 while TPOT did not (waiting for a slot, not a
  slower batch);
- `slows` where TPOT grew instead (a bigger batch, every request slower);
- `neither` when no level did any of these (the bound was below the limit: raise --max-concurrency).
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Collection
from typing import Literal

from pydantic import BaseModel, Field

from switchover.bench.scrape import parse_metrics
from switchover.bench.stats import percentile
from switchover.engines.profile import EngineProfile
from switchover.wire import timing
from switchover.wire.client import EngineClient, Timeouts
from switchover.wire.records import FailureKind, RequestRecord

Verdict = Literal["rejects", "queues", "slows", "neither"]
REJECT_STATUSES = frozenset({429, 503})


class OverloadStep(BaseModel):
    """One concurrency level."""

    concurrency: int
    sent: int
    ok: int
    rejected: int = Field(description="429 or 503 answers (or the engine profile's overload status)")
    other_errors: int
    ttft_p50_ms: float | None = None
    ttft_p90_ms: float | None = None
    tpot_p50_ms: float | None = None
    waiting_max: float | None = Field(default=None, description="Engine's waiting-requests gauge, highest seen")
    seconds: float


class OverloadReport(BaseModel):
    """Where an engine's overload behaviour begins, and which it is."""

    url: str
    engine: str | None
    model: str | None
    verdict: Verdict
    first_reject_at: int | None = None
    first_queue_at: int | None = None
    first_slow_at: int | None = None
    slots: int | None = Field(default=None, description="The engine's own parallel limit, where it reports one")
    waiting_metric: str | None = None
    steps: list[OverloadStep]
    reason: str


def _pct(values: list[float], q: float) -> float | None:
    """The q-th percentile (bench/stats.py's one definition); None, not measured, for no values."""
    return percentile(values, q) if values else None


async def _waiting(client: EngineClient, name: str | None, path: str = "/metrics") -> float | None:
    """The waiting gauge now (summed over its series, read by bench/scrape.py's parser), or None without one
    (no gauge in the profile, /metrics not answering or unreadable, or the series not exposed)."""
    if name is None:
        return None
    res = await client.request("GET", path)
    if res.failure is not None or res.status != 200:
        return None
    rows = parse_metrics(res.body.decode("utf-8", "replace"), {name: "waiting"}, endpoint="", t_ns=0, wall=0.0)
    values = [r["value"] for r in rows if r["name"] == name]
    return sum(values) if values else None


async def _slots(client: EngineClient, profile: EngineProfile | None) -> int | None:
    """The engine's own parallel limit where its profile names an endpoint for it (llama-server's /props)."""
    api = profile.api if profile is not None else None
    if api is None or not api.slots_path or not api.slots_field:
        return None
    res = await client.request("GET", api.slots_path, timeout=5)
    if res.failure is not None or res.status != 200:
        return None
    try:
        body = res.json()
    except ValueError:
        return None
    slots = body.get(api.slots_field) if isinstance(body, dict) else None
    return slots if isinstance(slots, int) and not isinstance(slots, bool) else None


async def _level(client: EngineClient, model: str | None, concurrency: int, waves: int, max_tokens: int,
                 waiting_name: str | None, extra: dict[str, object], metrics_path: str = "/metrics",
                 reject: Collection[int] = REJECT_STATUSES) -> OverloadStep:
    t0 = time.monotonic()
    sem = asyncio.Semaphore(concurrency)
    records: list[RequestRecord] = []

    async def one(i: int) -> None:
        async with sem:
            rec = await client.complete(f"Count slowly from one to one hundred. ({i})", model=model,
                                        max_tokens=max_tokens, temperature=0, stream=True, **extra)
            records.append(rec)

    waiting_max: float | None = None
    task = asyncio.ensure_future(asyncio.gather(*(one(i) for i in range(concurrency * waves))))
    while not task.done():
        w = await _waiting(client, waiting_name, metrics_path)
        if w is not None:
            waiting_max = w if waiting_max is None else max(waiting_max, w)
        await asyncio.wait([task], timeout=0.02)  # a short request may wait only briefly: look often
    await task
    ok = [r for r in records if r.failure is None]
    rejected = sum(1 for r in records if r.failure is not None and r.failure.kind is FailureKind.HTTP_STATUS
                   and r.status in reject)
    ttft = [r.ttft_ns / 1e6 for r in ok if r.ttft_ns is not None]
    tpots = [t for r in ok if (t := _tpot(r)) is not None]
    return OverloadStep(concurrency=concurrency, sent=len(records), ok=len(ok), rejected=rejected,
                        other_errors=len(records) - len(ok) - rejected, ttft_p50_ms=_pct(ttft, 50),
                        ttft_p90_ms=_pct(ttft, 90), tpot_p50_ms=_pct(tpots, 50), waiting_max=waiting_max,
                        seconds=round(time.monotonic() - t0, 2))


def _tpot(rec: RequestRecord) -> float | None:
    """TPOT by wire/timing.py's formulas (E2E to the last event carrying choices, N from usage); None, not 0, when
    every token arrived in one read (TTFT = E2E: the gaps were not seen, so the level's TPOT must not count it)."""
    n = rec.usage.completion_tokens if rec.usage is not None else None
    ttft = timing.ttft_ms(rec.send_ns, timing.first_token_ns(rec.chunk_ns, rec.chunk_text))
    e2e = timing.e2e_ms(rec.send_ns, timing.last_event_ns(rec.chunk_ns))
    if ttft is not None and ttft == e2e:
        return None
    return timing.tpot_ms(ttft, e2e, n)


def judge(steps: list[OverloadStep], queue_factor: float = 2.0) -> tuple[Verdict, int | None, int | None,
                                                                         int | None, str]:
    """The verdict from the levels (pure): rejects beats queues beats slows."""
    base = steps[0] if steps else None
    first_reject = next((s.concurrency for s in steps if s.rejected), None)
    first_queue = next((s.concurrency for s in steps if s.waiting_max is not None and s.waiting_max > 0), None)
    first_slow = None
    if base is not None and base.ttft_p50_ms and base.tpot_p50_ms:
        for s in steps[1:]:
            ttft_up = s.ttft_p50_ms is not None and s.ttft_p50_ms >= queue_factor * base.ttft_p50_ms
            tpot_up = s.tpot_p50_ms is not None and s.tpot_p50_ms >= queue_factor * base.tpot_p50_ms
            if first_queue is None and ttft_up and not tpot_up and all(x.waiting_max is None for x in steps):
                first_queue = s.concurrency
            if first_slow is None and tpot_up:
                first_slow = s.concurrency
    if first_reject is not None:
        return "rejects", first_reject, first_queue, first_slow, (
            f"429/503 from concurrency {first_reject} on" + (f"; requests waited from {first_queue}"
                                                             if first_queue else ""))
    if first_queue is not None:
        how = "the engine's waiting gauge above 0" if any(s.waiting_max for s in steps) else (
            f"TTFT p50 ≥ {queue_factor:g}× its value at concurrency 1 while TPOT held")
        return "queues", None, first_queue, first_slow, f"no rejection; requests wait from concurrency " \
                                                        f"{first_queue} ({how})"
    if first_slow is not None:
        return "slows", None, None, first_slow, f"no rejection and no queue; TPOT p50 ≥ {queue_factor:g}× " \
                                                f"from concurrency {first_slow} (a bigger batch)"
    top = steps[-1].concurrency if steps else 0
    return "neither", None, None, None, f"nothing up to concurrency {top}: raise --max-concurrency past the limit"


async def run_overload(url: str, *, model: str | None = None, profile: EngineProfile | None = None,
                       max_concurrency: int = 16, waves: int = 2, max_tokens: int = 32, timeout_s: float = 120.0,
                       api_key_env: str | None = None, queue_factor: float = 2.0) -> OverloadReport:
    """Raise concurrency 1, 2, 4, ... up to max_concurrency; bounded by (1 + 2 + ... ) × waves requests."""
    levels = [1]
    while levels[-1] * 2 <= max_concurrency:
        levels.append(levels[-1] * 2)
    if levels[-1] != max_concurrency:
        levels.append(max_concurrency)
    spec = profile.metric("waiting") if profile is not None else None
    waiting_name = spec.name if spec is not None else None
    metrics_path = profile.metrics_endpoint.path if profile is not None else "/metrics"
    overload = profile.api.overload_status if profile is not None else None
    reject = REJECT_STATUSES | {overload} if overload is not None else REJECT_STATUSES
    t = Timeouts(connect=5.0, first_byte=timeout_s, idle=timeout_s, total=timeout_s)
    async with EngineClient(url, api_key_env=api_key_env, timeouts=t) as client:
        if model is None:
            names = await client.models()
            model = names[0] if names else None
        slots = await _slots(client, profile)
        # every answer the same length where the engine can be told to ignore EOS (its profile says how)
        field = profile.api.ignore_eos_field if profile is not None else None
        extra: dict[str, object] = {field: True} if field else {}
        steps = [await _level(client, model, c, waves, max_tokens, waiting_name, extra, metrics_path, reject)
                 for c in levels]
    verdict, rej, que, slow, reason = judge(steps, queue_factor)
    return OverloadReport(url=url, engine=profile.name if profile else None, model=model, verdict=verdict,
                          first_reject_at=rej, first_queue_at=que, first_slow_at=slow, slots=slots,
                          waiting_metric=waiting_name, steps=steps, reason=reason)
