"""Streaming shape: text granularity per chunk, and tool-call argument streaming."""

from __future__ import annotations

import orjson

from switchover.probe.catalog._util import end_if, not_answered, rejected, send_ok, unusable
from switchover.probe.context import ProbeContext
from switchover.probe.registry import probe
from switchover.probe.report import Observation

WEATHER_TOOL = {
    "type": "function",
    "function": {
        "name": "get_weather",
        "description": "Current weather for a city",
        "parameters": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]},
    },
}


def granularity(tokens: int | None, text_chunks: int) -> str:
    """'token' when each text chunk carries one token on average, else 'N tokens'."""
    if not tokens or not text_chunks:
        return "unknown"
    per = tokens / text_chunks
    return "token" if 0.8 <= per <= 1.25 else f"{per:.1f} tokens"


@probe(
    id="stream.granularity",
    title="Stream granularity",
    category="stream",
    request="stream=true, temperature 0, max_tokens 32, include_usage",
    observes="tokens per text chunk (usage.completion_tokens / chunks with text) and characters per chunk",
    breaking=False,
    breaks="UIs and proxies that assume one token per event re-chunk or mis-count",
)
async def stream_granularity(ctx: ProbeContext) -> Observation:
    rec = await send_ok(ctx, "stream", temperature=0, max_tokens=32, stream=True, include_usage=True)
    chunks = [c for c in rec.chunk_text if c]
    tokens = rec.usage.completion_tokens if rec.usage else None
    g = granularity(tokens, len(chunks))
    chars = sum(map(len, chunks)) / len(chunks) if chunks else 0.0
    return Observation(
        value=g,
        summary=f"{g} per chunk ({len(chunks)} text chunks, {tokens} tokens, {chars:.1f} chars/chunk)",
        detail={"chunks": len(chunks), "tokens": tokens},
    )


@probe(
    id="tools.stream",
    title="Tool-call streaming",
    category="tools",
    request="chat, stream=true, one tool, tool_choice naming it",
    observes="whether tool calls come back, in how many chunks, and whether the arguments parse as JSON",
    breaking=True,
    breaks="tool-using agents get no tool call, or must reassemble arguments differently",
)
async def tools_stream(ctx: ProbeContext) -> Observation:
    if ctx.api != "chat":
        return Observation.skipped("chat API only")
    rec = await ctx.send(
        "What is the weather in Paris?",
        temperature=0,
        max_tokens=48,
        stream=True,
        tools=[WEATHER_TOOL],
        tool_choice={"type": "function", "function": {"name": "get_weather"}},
    )
    end_if(not_answered(rec, "the tool request"))
    rej = rejected(rec)
    if rej:
        return Observation(
            value={"supported": False, "status": rej["status"]},
            summary=f"rejected: HTTP {rej['status']} {rej['message'][:80]}",
            detail=rej,
        )
    end_if(unusable(rec, "tool stream"))
    if not rec.tool_calls:
        return Observation(
            value={"supported": False, "status": 200}, summary="no tool call returned", detail={"text": rec.text[:80]}
        )
    try:
        orjson.loads(rec.tool_calls[0].arguments or "null")
        valid = True
    except orjson.JSONDecodeError:
        valid = False
    how = "one chunk" if rec.tool_call_chunks <= 1 else "incremental"
    return Observation(
        value={"supported": True, "status": 200, "arguments": how},
        summary=f"{rec.tool_calls[0].name} in {rec.tool_call_chunks} chunk(s), arguments "
        f"{'valid' if valid else 'INVALID'} JSON",
        detail={
            "chunks": rec.tool_call_chunks,
            "arguments": rec.tool_calls[0].arguments[:120],
            "finish_reason": rec.finish_reason,
        },
    )
