"""usage: in streams (asked for and not), cached_tokens on a repeated prefix, stream_options without stream."""

from __future__ import annotations

from switchover.probe.catalog._util import refusal, send_ok
from switchover.probe.context import ProbeContext
from switchover.probe.registry import probe
from switchover.probe.report import Observation
from switchover.probe.values import Cached, Outcome, Presence


def long_prefix(context: int | None) -> str:
    """Contract-like text of roughly 40% of the context (about 3 characters per token), at most ~800 tokens."""
    target = min(2400, int((context or 2048) * 1.2))
    out: list[str] = []
    i = 0
    while sum(len(x) for x in out) < target:
        out.append(f"Clause {i}: the tenant shall keep the premises in good repair and report damage in {i + 2} days.")
        i += 1
    return " ".join(out)


@probe(
    id="usage.stream_include_usage",
    title="usage in a stream with include_usage",
    category="usage",
    request="stream=true, stream_options.include_usage=true, max_tokens 8",
    observes="whether a usage object arrives, and whether it is a separate final chunk",
    breaking=True,
    breaks="token accounting and billing from streamed responses gets no counts",
    expect=lambda api: Presence.PRESENT if api.streaming_usage else Presence.ABSENT,
)
async def stream_include_usage(ctx: ProbeContext) -> Observation:
    rec = await send_ok(ctx, "stream", temperature=0, max_tokens=8, stream=True, include_usage=True)
    if rec.usage is None or rec.usage.completion_tokens is None:
        return Observation(value=Presence.ABSENT, summary="no usage in the stream")
    separate = rec.usage_ns is not None and (not rec.chunk_ns or rec.usage_ns >= rec.chunk_ns[-1])
    return Observation(
        value=Presence.PRESENT,
        summary=f"present (completion_tokens {rec.usage.completion_tokens})" + (", final chunk" if separate else ""),
        detail={"completion_tokens": rec.usage.completion_tokens},
    )


@probe(
    id="usage.stream_default",
    title="usage in a stream without stream_options",
    category="usage",
    request="stream=true with no stream_options, max_tokens 8",
    observes="whether usage arrives anyway",
    breaking=False,
    breaks="clients that read usage without asking for it lose (or newly get) the counts",
)
async def stream_default(ctx: ProbeContext) -> Observation:
    rec = await send_ok(ctx, "stream", temperature=0, max_tokens=8, stream=True, include_usage=False)
    present = rec.usage is not None and rec.usage.completion_tokens is not None
    return Observation(
        value=Presence.PRESENT if present else Presence.ABSENT,
        summary="usage sent unasked" if present else "no usage unless asked",
    )


@probe(
    id="usage.cached_tokens",
    title="cached_tokens on a repeated long prefix",
    category="usage",
    request="the same long prompt (~40% of the context, at most ~800 tokens) twice, max_tokens 4",
    observes="usage.prompt_tokens_details.cached_tokens on the second request",
    breaking=False,
    breaks="cache-hit dashboards and cost models based on cached_tokens go blank",
    expect=lambda api: {"always": Cached.HIT, "with_flag": Cached.NOT_REPORTED, "never": Cached.NOT_REPORTED}.get(
        api.cached_tokens_reported
    ),
)
async def cached_tokens(ctx: ProbeContext) -> Observation:
    recs = [
        await send_ok(ctx, "long-prefix request", long_prefix(ctx.context), temperature=0, max_tokens=4)
        for _ in range(2)
    ]
    second = recs[1].usage
    if second is None or second.cached_tokens is None:
        return Observation(
            value=Cached.NOT_REPORTED,
            summary="no prompt_tokens_details.cached_tokens",
            detail={"prompt_tokens": second.prompt_tokens if second else None},
        )
    value = Cached.HIT if second.cached_tokens > 0 else Cached.ZERO
    return Observation(
        value=value,
        summary=f"{second.cached_tokens} of {second.prompt_tokens} prompt tokens cached",
        detail={"cached_tokens": second.cached_tokens, "prompt_tokens": second.prompt_tokens},
    )


@probe(
    id="usage.stream_options_without_stream",
    title="stream_options on a non-streamed request",
    category="usage",
    request="stream=false with stream_options.include_usage=true",
    observes="accepted or rejected",
    breaking=True,
    breaks="clients that always send stream_options get HTTP 400 on non-streamed calls",
)
async def stream_options_without_stream(ctx: ProbeContext) -> Observation:
    rec = await ctx.send(temperature=0, max_tokens=2, stream=False, stream_options={"include_usage": True})
    return refusal(rec, "the request") or Observation(value=Outcome.ACCEPTED, summary="accepted")
