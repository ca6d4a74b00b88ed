"""Overload behaviour (docs/probe.md, "reject or wait?"): past its concurrency limit, does an engine reject
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

Nothing answering is not a verdict: an endpoint that refuses, times out or speaks another protocol (TLS against
plain HTTP) on GET /v1/models, or whose first level got no HTTP answer at all, is Unreachable (exit 3), and a first
level where every request was refused with an error status is a failed check (exit 1). The whole run has a
deadline (`max_run_s`): a level still running at it is stopped, and the report says so.
"""

from __future__ import annotations

import asyncio
import contextlib
import math
import time
from collections.abc import Collection
from typing import Literal

from pydantic import BaseModel, Field

from switchover.engines.profile import EngineProfile
from switchover.engines.server_facts import info_paths, reported_cap
from switchover.errors import CheckFailed, Unreachable
from switchover.measure import timing
from switchover.measure.percentiles import percentile
from switchover.measure.prometheus import parse_metrics
from switchover.termtext import printable
from switchover.wire.client import EngineClient, Timeouts
from switchover.wire.discovery import ModelListing, list_models, loading_engine, pick_model, profiles_for
from switchover.wire.records import Failure, FailureKind, RequestRecord

Verdict = Literal["rejects", "queues", "slows", "neither"]
REJECT_STATUSES = frozenset({429, 503})
# failures that mean no HTTP exchange took place: nothing was measured
_NO_ANSWER = frozenset(
    {
        FailureKind.CONNECT,
        FailureKind.CONNECT_TIMEOUT,
        FailureKind.FIRST_BYTE_TIMEOUT,
        FailureKind.TOTAL_TIMEOUT,
        FailureKind.DISCONNECTED,
        FailureKind.PROTOCOL,
    }
)


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
    cut: bool = Field(default=False, description="Stopped by the whole-run deadline before every request ended")


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
    slots_source: str | None = Field(
        default=None,
        description="Where `slots` was read (cited), or why what the engine reported was not used (its release is "
        "outside the range the profile's request_cap holds for); None: the engine reports none",
    )
    waiting_metric: str | None = None
    steps: list[OverloadStep]
    reason: str
    stopped: str | None = Field(
        default=None,
        description="Why the run ended before its last level (the whole-run deadline); None: every level ran",
    )


def _pct(values: list[float], q: float) -> float | None:
    """The q-th percentile (measure/percentiles.py's one definition); None, not measured, for no values."""
    return percentile(values, q) if values else None


async def _waiting(
    client: EngineClient, name: str | None, path: str = "/metrics", timeout_s: float = 5.0
) -> float | None:
    """The waiting gauge now (summed over its series, read by bench/scrape.py's parser), or None without one
    (no gauge in the profile, /metrics not answering within timeout_s or unreadable, or the series not exposed)."""
    if name is None:
        return None
    res = await client.request("GET", path, timeout=timeout_s)
    if res.failure is not None or res.status != 200:
        return None
    rows = parse_metrics(res.body.decode("utf-8", "replace"), {name: "waiting"}, endpoint="", t_ns=0, wall=0.0)
    values = [r["value"] for r in rows if r["name"] == name]
    return sum(values) if values else None


async def _slots(client: EngineClient, profile: EngineProfile | None) -> tuple[int | None, str | None]:
    """The engine's own parallel limit where its profile's `request_cap:` says the server reports one (llama-server's
    /props total_slots) and holds at the release it reports: (slots, where read, cited), (None, why not used) or
    (None, None); engines/server_facts.py reads it, as bench's binding cap does."""
    if profile is None or not profile.request_cap:
        return None, None
    info: dict[str, object] = {}
    for path in info_paths(profile):
        res = await client.request("GET", path, timeout=5)
        if res.failure is None and res.status == 200:
            with contextlib.suppress(ValueError):
                info[path] = res.json()
    return reported_cap(profile, info)


async def _level(
    client: EngineClient,
    model: str | None,
    concurrency: int,
    waves: int,
    max_tokens: int,
    waiting_name: str | None,
    extra: dict[str, object],
    metrics_path: str = "/metrics",
    reject: Collection[int] = REJECT_STATUSES,
    deadline: float = math.inf,
) -> tuple[OverloadStep, list[Failure]]:
    """One level, its requests cancelled at `deadline` (time.monotonic()) if still running (then `cut`); and the
    failures of its requests."""
    t0 = time.monotonic()
    sem = asyncio.Semaphore(concurrency)
    records: list[RequestRecord] = []

    async def one(i: int) -> None:
        async with sem:
            rec = await client.complete(
                f"Count slowly from one to one hundred. ({i})",
                model=model,
                max_tokens=max_tokens,
                temperature=0,
                stream=True,
                **extra,
            )
            records.append(rec)

    waiting_max: float | None = None
    task = asyncio.ensure_future(asyncio.gather(*(one(i) for i in range(concurrency * waves))))
    cut = False
    while not task.done():
        left = deadline - time.monotonic()
        if left <= 0:
            task.cancel()
            await asyncio.wait([task])
            cut = True
            break
        w = await _waiting(client, waiting_name, metrics_path, min(5.0, left))
        if w is not None:
            waiting_max = w if waiting_max is None else max(waiting_max, w)
        await asyncio.wait([task], timeout=min(0.02, max(left, 0.001)))  # a short request may wait only briefly
    if not cut:
        await task
    ok = [r for r in records if r.failure is None]
    rejected = sum(
        1 for r in records if r.failure is not None and r.failure.kind is FailureKind.HTTP_STATUS and r.status in reject
    )
    ttft = [r.ttft_ns / 1e6 for r in ok if r.ttft_ns is not None]
    tpots = [t for r in ok if (t := _tpot(r)) is not None]
    failures = [r.failure for r in records if r.failure is not None]
    return OverloadStep(
        concurrency=concurrency,
        sent=len(records),
        ok=len(ok),
        rejected=rejected,
        other_errors=len(records) - len(ok) - rejected,
        ttft_p50_ms=_pct(ttft, 50),
        ttft_p90_ms=_pct(ttft, 90),
        tpot_p50_ms=_pct(tpots, 50),
        waiting_max=waiting_max,
        seconds=round(time.monotonic() - t0, 2),
        cut=cut,
    ), failures


def _tpot(rec: RequestRecord) -> float | None:
    """TPOT by measure/timing.py's formulas (E2E to the last event carrying choices, N from usage); None, not 0, when
    every token arrived in one read (TTFT = E2E: the gaps were not seen, so the level's TPOT must not count it)."""
    n = rec.usage.completion_tokens if rec.usage is not None else None
    ttft = timing.ttft_ms(rec.send_ns, timing.first_token_ns(rec.chunk_ns, rec.chunk_text))
    e2e = timing.e2e_ms(rec.send_ns, timing.last_event_ns(rec.chunk_ns))
    if ttft is not None and ttft == e2e:
        return None
    return timing.tpot_ms(ttft, e2e, n)


def judge(
    steps: list[OverloadStep], queue_factor: float = 2.0
) -> tuple[Verdict, int | None, int | None, int | None, str]:
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
        return (
            "rejects",
            first_reject,
            first_queue,
            first_slow,
            (
                f"429/503 from concurrency {first_reject} on"
                + (f"; requests waited from {first_queue}" if first_queue else "")
            ),
        )
    if first_queue is not None:
        how = (
            "the engine's waiting gauge above 0"
            if any(s.waiting_max for s in steps)
            else (f"TTFT p50 ≥ {queue_factor:g}× its value at concurrency 1 while TPOT held")
        )
        return (
            "queues",
            None,
            first_queue,
            first_slow,
            f"no rejection; requests wait from concurrency {first_queue} ({how})",
        )
    if first_slow is not None:
        return (
            "slows",
            None,
            None,
            first_slow,
            f"no rejection and no queue; TPOT p50 ≥ {queue_factor:g}× from concurrency {first_slow} (a bigger batch)",
        )
    top = steps[-1].concurrency if steps else 0
    return "neither", None, None, None, f"nothing up to concurrency {top}: raise --max-concurrency past the limit"


def _reachable(url: str, listing: ModelListing, timeout_s: float, profile: EngineProfile | None) -> None:
    """Unreachable unless GET /v1/models got an HTTP answer (any status but 503: some engines serve no model list;
    a 503 before any load is an engine still loading, whose every answer would read as a rejection)."""
    if listing.failure is None and listing.status == 503:
        whose = loading_engine(503, listing.text, profiles_for(profile.name if profile else None))
        what = f"still loading: {whose}'s loading answer" if whose else "still loading?"
        raise CheckFailed(
            f"{url} answers GET /v1/models with 503 before any load ({what}); nothing was measured",
            hint=f"wait until `switchover ready {url}` passes",
        )
    if listing.failure is None or listing.failure.kind not in _NO_ANSWER:
        return
    kind = listing.failure.kind
    if kind in (FailureKind.FIRST_BYTE_TIMEOUT, FailureKind.TOTAL_TIMEOUT):
        why = f"no answer to GET /v1/models within {timeout_s:g} s (--timeout-s)"
    else:
        why = printable(listing.failure.message, 300)
    raise Unreachable(
        f"{url}: {why}; nothing was measured", hint="is the engine up on that address and scheme (http:// or https://)?"
    )


def _first_level_measured(url: str, step: OverloadStep, failures: list[Failure]) -> None:
    """Concurrency 1 must have been answered: no HTTP answer at all is Unreachable, nothing but error answers a
    failed check (exit 1); either way there is nothing to judge."""
    if step.ok or step.rejected or step.cut or not failures:
        return
    first = printable(failures[0].message, 300)
    if all(f.kind in _NO_ANSWER for f in failures):
        raise Unreachable(f"{url}: no request at concurrency 1 got an answer ({first}); nothing was measured")
    raise CheckFailed(f"{url}: every request at concurrency 1 failed ({first}); nothing was measured")


def _levels(max_concurrency: int) -> list[int]:
    levels = [1]
    while levels[-1] * 2 <= max_concurrency:
        levels.append(levels[-1] * 2)
    if levels[-1] != max_concurrency:
        levels.append(max_concurrency)
    return levels


async def run_overload(
    url: str,
    *,
    model: str | None = None,
    profile: EngineProfile | None = None,
    max_concurrency: int = 16,
    waves: int = 2,
    max_tokens: int = 32,
    timeout_s: float = 120.0,
    api_key_env: str | None = None,
    queue_factor: float = 2.0,
    max_run_s: float = 900.0,
) -> OverloadReport:
    """Raise concurrency 1, 2, 4, ... up to max_concurrency; bounded by (1 + 2 + ... ) × waves requests, each by
    timeout_s, and the whole run by max_run_s."""
    deadline = time.monotonic() + max_run_s
    levels = _levels(max_concurrency)
    spec = profile.metric("waiting") if profile is not None else None
    waiting_name = spec.name if spec is not None else None
    metrics_path = profile.metrics_endpoint.path if profile is not None else "/metrics"
    overload = profile.api.overload_status if profile is not None else None
    reject = REJECT_STATUSES | {overload} if overload is not None else REJECT_STATUSES
    t = Timeouts(connect=min(5.0, timeout_s), first_byte=timeout_s, idle=timeout_s, total=timeout_s)
    steps: list[OverloadStep] = []
    stopped = None
    async with EngineClient(url, api_key_env=api_key_env, timeouts=t) as client:
        listing = await list_models(client, min(timeout_s, max_run_s))
        _reachable(url, listing, min(timeout_s, max_run_s), profile)
        model = pick_model(listing, model)
        slots, slots_source = await _slots(client, profile)
        # every answer the same length where the engine can be told to ignore EOS (its profile says how)
        field = profile.api.ignore_eos_field if profile is not None else None
        extra: dict[str, object] = {field: True} if field else {}
        for c in levels:
            if time.monotonic() >= deadline:
                stopped = f"the {max_run_s:g} s run deadline (--max-run-s) passed before concurrency {c}"
                break
            step, failed = await _level(
                client, model, c, waves, max_tokens, waiting_name, extra, metrics_path, reject, deadline
            )
            steps.append(step)
            if c == levels[0]:
                _first_level_measured(url, step, failed)
            if step.cut:
                stopped = f"the {max_run_s:g} s run deadline (--max-run-s) cut concurrency {c} short"
                break
    verdict, rej, que, slow, reason = judge([s for s in steps if not s.cut], queue_factor)
    if stopped is not None and verdict == "neither":
        top = max((s.concurrency for s in steps if not s.cut), default=0)
        reason = f"nothing up to concurrency {top} before the deadline: raise --max-run-s (or lower --waves)"
    return OverloadReport(
        url=url,
        engine=profile.name if profile else None,
        model=model,
        verdict=verdict,
        first_reject_at=rej,
        first_queue_at=que,
        first_slow_at=slow,
        slots=slots,
        slots_source=slots_source,
        waiting_metric=waiting_name,
        steps=steps,
        reason=reason,
        stopped=stopped,
    )
