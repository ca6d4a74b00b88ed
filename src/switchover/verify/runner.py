"""Run `verify`: greedy consistency, structured output, long inputs; an endpoint that dies gives a partial report."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from switchover.errors import Unreachable
from switchover.verify.divergence import compare, summarize
from switchover.verify.greedy import EndpointDown, greedy_output
from switchover.verify.longinput import long_input_side
from switchover.verify.prompts import PromptCase
from switchover.verify.report import EquivalenceReport
from switchover.verify.structured import structured_side
from switchover.wire import EngineClient, Timeouts
from switchover.wire.discovery import Target, discover_target


@dataclass(frozen=True)
class VerifyOptions:
    structured: int = 5  # JSON-schema prompts per side (0 = skip)
    long_inputs: bool = True
    boundary: bool = True
    request_timeout_s: float = 300.0


async def _ready(client: EngineClient, target: Target) -> tuple[str, int | None]:
    found = await discover_target(client, target)
    if found.listing.failure is not None:
        raise Unreachable(f"{target.url}: {found.listing.failure.message}")
    if found.model is None:
        raise Unreachable(f"{target.url}: no model given and /v1/models lists none")
    return found.model, found.context.tokens if found.context is not None else None


async def run_verify(
    old: Target,
    new: Target,
    cases: list[PromptCase],
    opts: VerifyOptions | None = None,
    on_progress: Callable[[str], None] = lambda _: None,
) -> EquivalenceReport:
    opts = opts or VerifyOptions()
    t = Timeouts(
        connect=5, first_byte=opts.request_timeout_s, idle=opts.request_timeout_s, total=opts.request_timeout_s
    )
    async with (
        EngineClient(old.url, api_key_env=old.api_key_env, timeouts=t) as a,
        EngineClient(new.url, api_key_env=new.api_key_env, timeouts=t) as b,
    ):
        model_a, ctx_a = await _ready(a, old)
        model_b, ctx_b = await _ready(b, new)
        report = EquivalenceReport(old_url=old.url, new_url=new.url, model_old=model_a, model_new=model_b)
        try:
            for case in cases:
                on_progress(f"greedy {case.id}")
                oa = await greedy_output(a, model_a, case)
                ob = await greedy_output(b, model_b, case)
                # one reference tokenizer (the old server's) so that token positions are comparable
                if oa.error is None and ob.error is None:
                    oa.ids = await a.tokenize(oa.text, model_a, add_special=False) if oa.text else []
                    ob.ids = await a.tokenize(ob.text, model_a, add_special=False) if ob.text else []
                report.greedy.append(compare(case.id, case.kind, oa, ob))
            report.summary = summarize(report.greedy)
            if opts.structured:
                for client, model in ((a, model_a), (b, model_b)):
                    on_progress(f"structured output on {client.base_url}")
                    report.structured.append(await structured_side(client, model, opts.structured))
            if opts.long_inputs:
                for client, model, ctx in ((a, model_a, ctx_a), (b, model_b, ctx_b)):
                    on_progress(f"long inputs on {client.base_url}")
                    report.long_inputs.append(await long_input_side(client, model, ctx, boundary=opts.boundary))
        except EndpointDown as exc:
            report.partial, report.partial_reason = True, f"an endpoint went away: {exc}"
            if report.greedy and report.summary is None:
                report.summary = summarize(report.greedy)
    return report
