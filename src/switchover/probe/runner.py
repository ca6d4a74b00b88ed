"""Run the selected probes against one or two endpoints; an endpoint that goes away gives a partial report."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from dataclasses import dataclass

from switchover.engines import load_profile
from switchover.probe.context import EndpointDown, ProbeContext
from switchover.probe.expect import matches
from switchover.probe.registry import Probe, ProbeEnded
from switchover.probe.report import EndpointInfo, Observation, ProbeReport, plain_value
from switchover.wire import EngineClient, Timeouts
from switchover.wire.discovery import Target, discover_target
from switchover.wire.records import Api

__all__ = ["ProbeOptions", "Target", "run_probes"]  # Target: one endpoint, as wire.discovery defines it


@dataclass(frozen=True)
class ProbeOptions:
    api: Api = "chat"
    time_budget_s: float = 60.0  # per open-ended generation
    probe_timeout_s: float = 180.0  # per probe on one endpoint
    request_timeout_s: float = 120.0


async def _observe_side(
    target: Target, probes: list[Probe], opts: ProbeOptions, on_progress: Callable[[str], None]
) -> tuple[EndpointInfo, dict[str, Observation]]:
    obs: dict[str, Observation] = {}
    timeouts = Timeouts(
        connect=5.0, first_byte=opts.request_timeout_s, idle=opts.request_timeout_s, total=opts.request_timeout_s
    )
    async with EngineClient(target.url, api_key_env=target.api_key_env, timeouts=timeouts) as client:
        found = await discover_target(client, target)
        if found.listing.failure is not None:
            reason = found.listing.failure.message
            return (
                EndpointInfo(url=target.url, model=target.model, reachable=False, reason=reason),
                {p.id: Observation.skipped(f"endpoint unreachable: {reason}") for p in probes},
            )
        model = found.model
        if model is None:
            reason = "no model given and /v1/models lists none"
            return (
                EndpointInfo(url=target.url, reachable=False, reason=reason),
                {p.id: Observation.skipped(reason) for p in probes},
            )
        context = found.context.tokens if found.context is not None else None
        info = EndpointInfo(url=target.url, engine=target.engine, model=model, context=context)
        ctx = ProbeContext(client=client, model=model, api=opts.api, context=context, time_budget_s=opts.time_budget_s)
        down: str | None = None
        for p in probes:
            if down is not None:
                obs[p.id] = Observation.skipped(f"endpoint went away: {down}")
                continue
            on_progress(f"{target.url} {p.id}")
            try:
                async with asyncio.timeout(opts.probe_timeout_s):
                    obs[p.id] = await p.run(ctx)
            except ProbeEnded as end:  # the probe's own early answer, not a crash
                obs[p.id] = end.observation
            except EndpointDown as exc:
                down = str(exc)
                obs[p.id] = Observation.failed(f"endpoint went away: {down}")
            except TimeoutError:
                obs[p.id] = Observation.failed(f"probe took longer than {opts.probe_timeout_s:g} s")
            except Exception as exc:  # a probe bug must not lose the rest of the report
                obs[p.id] = Observation.failed(f"probe error: {type(exc).__name__}: {exc}")
        if target.engine:
            _check_profile(target.engine, target.engine_version, probes, obs)
        if down is not None:
            info = info.model_copy(update={"reachable": False, "reason": f"went away during probing: {down}"})
    return info, obs


def _check_profile(engine: str, version: str | None, probes: list[Probe], obs: dict[str, Observation]) -> None:
    api = load_profile(engine, version).api
    for p in probes:
        o = obs[p.id]
        pred = plain_value(p.expected(api))
        if pred is None:
            continue
        o.expected = pred
        if o.status == "observed":
            o.profile_match = matches(o.value, pred)


async def run_probes(
    old: Target,
    new: Target | None,
    probes: list[Probe],
    opts: ProbeOptions | None = None,
    on_progress: Callable[[str], None] = lambda _: None,
) -> ProbeReport:
    """Observe every probe on old, then on new (sequentially, so timings do not interfere), and judge."""
    opts = opts or ProbeOptions()
    old_info, old_obs = await _observe_side(old, probes, opts, on_progress)
    new_info, new_obs = (None, None)
    if new is not None:
        new_info, new_obs = await _observe_side(new, probes, opts, on_progress)
    results = [p.judge(old_obs[p.id], new_obs[p.id] if new_obs is not None else None) for p in probes]
    gone = [i for i in (old_info, new_info) if i is not None and not i.reachable]
    return ProbeReport(
        old=old_info,
        new=new_info,
        results=results,
        breaking_differences=[r.id for r in results if r.breaking_difference],
        partial=bool(gone),
        partial_reason="; ".join(f"{i.url}: {i.reason}" for i in gone) or None,
        profile_mismatches=[
            f"{side}:{r.id}"
            for r in results
            for side, o in (("old", r.old), ("new", r.new))
            if o is not None and o.profile_match is False
        ],
    )
