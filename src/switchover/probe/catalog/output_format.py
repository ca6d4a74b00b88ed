"""What comes back: finish_reason vocabulary, response_format, logprobs, echoed model, default and overflow length."""

from __future__ import annotations

import dataclasses
from typing import Any

import jsonschema
import orjson

from switchover.probe import stops
from switchover.probe.catalog._util import end_if, not_answered, rejected, send_ok, unusable
from switchover.probe.context import ProbeContext
from switchover.probe.registry import probe
from switchover.probe.report import Observation
from switchover.probe.values import LargeCap, Overflow, error_value
from switchover.wire import FailureKind, RequestRecord

BOOL_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {"ok": {"type": "boolean"}},
    "required": ["ok"],
    "additionalProperties": False,
}

_FR_BREAKS = "clients that branch on finish_reason (retry on 'length', accept on 'stop') take the wrong branch"


@probe(
    id="finish.length",
    title="finish_reason when max_tokens is hit",
    category="finish_reason",
    request="max_tokens=3 at temperature 0",
    observes="finish_reason",
    breaking=True,
    breaks=_FR_BREAKS,
    expect=lambda api: "length",
)
async def finish_length(ctx: ProbeContext) -> Observation:
    rec = await send_ok(ctx, "request", temperature=0, max_tokens=3)
    return Observation(value=rec.finish_reason, summary=str(rec.finish_reason))


@probe(
    id="finish.stop_string",
    title="finish_reason when a stop string is hit",
    category="finish_reason",
    request="temperature 0 with a stop string from the greedy output",
    observes="finish_reason",
    breaking=True,
    breaks=_FR_BREAKS + " (e.g. 'stop_sequence' instead of 'stop')",
    expect=lambda api: "stop_sequence" if "stop_sequence" in api.finish_reasons else "stop",
)
async def finish_stop(ctx: ProbeContext) -> Observation:
    ref = await ctx.greedy()
    end_if(unusable(ref, "greedy reference"))
    pick = stops.token_stop([c for c in ref.chunk_text if c], ref.text)
    if pick is None:
        return Observation.failed("greedy output too short to pick a stop string")
    rec = await send_ok(ctx, "request", temperature=0, max_tokens=48, stop=[pick[0]])
    return Observation(value=rec.finish_reason, summary=str(rec.finish_reason), detail={"stop": pick[0]})


@probe(
    id="finish.eos",
    title="finish_reason when the model emits EOS",
    category="finish_reason",
    request="temperature 0 with logit_bias +100 on the EOS token (id from the server's /tokenize)",
    observes="finish_reason and the text length",
    breaking=True,
    breaks=_FR_BREAKS,
    expect=lambda api: "stop",
)
async def finish_eos(ctx: ProbeContext) -> Observation:
    eos_id, eos = await ctx.eos_token_id()
    if eos_id is None:
        rec = await ctx.send(temperature=0, max_tokens=64)
        if rec.failure is None and rec.finish_reason not in (None, "length"):
            return Observation(value=rec.finish_reason, summary=f"{rec.finish_reason} (natural EOS)")
        return Observation.failed("no EOS token id found via /tokenize and the model did not stop by itself")
    rec = await send_ok(ctx, "logit_bias request", temperature=0, max_tokens=16, logit_bias={str(eos_id): 100})
    return Observation(
        value=rec.finish_reason,
        summary=f"{rec.finish_reason} after {len(rec.text)} chars",
        detail={"eos": eos, "eos_id": eos_id, "text": rec.text[:40]},
    )


def _json_result(rec: RequestRecord, schema: dict[str, Any] | None) -> Observation:
    end_if(not_answered(rec, "the request"))
    rej = rejected(rec)
    if rej:
        return Observation(
            value={"accepted": False, "status": rej["status"], "valid": None},
            summary=f"rejected: HTTP {rej['status']} {rej['message'][:80]}",
            detail=rej,
        )
    try:
        obj = orjson.loads(rec.text)
        validity = "valid" if isinstance(obj, dict) else "invalid"
        if validity == "valid" and schema is not None:
            jsonschema.validate(obj, schema)
    except (orjson.JSONDecodeError, jsonschema.ValidationError):
        truncated = rec.finish_reason == "length" and rec.text.lstrip().startswith("{")
        validity = "truncated" if truncated else "invalid"
    return Observation(
        value={"accepted": True, "status": 200, "valid": validity},
        summary=f"accepted, {validity} JSON (finish {rec.finish_reason})",
        detail={"text": rec.text[:120]},
    )


@probe(
    id="response_format.json_object",
    title="response_format json_object",
    category="response_format",
    request='response_format {"type": "json_object"}, temperature 0, max_tokens 128',
    observes="accepted or rejected; the text: a JSON object, truncated JSON (hit max_tokens) or invalid",
    breaking=True,
    breaks="JSON mode stops constraining output: parsers downstream fail",
)
async def json_object(ctx: ProbeContext) -> Observation:
    rec = await ctx.send(
        "Describe a cat as a JSON object.", temperature=0, max_tokens=128, response_format={"type": "json_object"}
    )
    return _json_result(rec, None)


@probe(
    id="response_format.json_schema",
    title="response_format json_schema (OpenAI shape)",
    category="response_format",
    request='response_format {"type": "json_schema", "json_schema": {"name", "schema", "strict"}} with a '
    "one-boolean schema",
    observes="accepted or rejected; whether the text validates against the schema",
    breaking=True,
    breaks="structured-output requests are rejected or come back unconstrained",
    expect=lambda api: (
        {"accepted": True} if api.openai_json_schema else {"accepted": False, "status": api.validation_status}
    ),
)
async def json_schema(ctx: ProbeContext) -> Observation:
    fmt = {"type": "json_schema", "json_schema": {"name": "answer", "schema": BOOL_SCHEMA, "strict": True}}
    rec = await ctx.send("Is the sky blue? Answer in JSON.", temperature=0, max_tokens=96, response_format=fmt)
    return _json_result(rec, BOOL_SCHEMA)


def top_count(rec: RequestRecord) -> int | None:
    """How many alternatives the first generated token carries in the logprobs (chat or completions shape)."""
    for entry in rec.logprobs or []:
        if not isinstance(entry, dict):
            continue
        content = entry.get("content")
        if isinstance(content, list) and content:
            tops = content[0].get("top_logprobs")
            return len(tops) if isinstance(tops, list) else 0
        tops = entry.get("top_logprobs")
        if isinstance(tops, list) and tops:
            return len(tops[0]) if isinstance(tops[0], dict | list) else 0
    return None


@probe(
    id="logprobs.cap",
    title="top_logprobs cap",
    category="logprobs",
    request="logprobs with top_logprobs 5, 20 and 21 (max_tokens 2)",
    observes="alternatives returned per token, or the rejection",
    breaking=True,
    breaks="clients asking for many alternatives get an error or fewer than asked",
)
async def logprobs_cap(ctx: ProbeContext) -> Observation:
    out: dict[str, Any] = {}
    for k in (5, 20, 21):
        params: dict[str, Any] = {"logprobs": True, "top_logprobs": k} if ctx.api == "chat" else {"logprobs": k}
        rec = await ctx.send(temperature=0, max_tokens=2, **params)
        end_if(not_answered(rec, f"top_logprobs={k}"))
        rej = rejected(rec)
        out[str(k)] = f"HTTP {rej['status']}" if rej else top_count(rec)
    return Observation(value=out, summary=", ".join(f"{k}->{v}" for k, v in out.items()))


@probe(
    id="logprobs.default_top",
    title="logprobs without top_logprobs",
    category="logprobs",
    request="logprobs true, no top_logprobs (chat)",
    observes="how many alternatives come back per token",
    breaking=False,
    breaks="payloads grow (or shrink) unexpectedly: alternatives appear that were not asked for",
)
async def logprobs_default(ctx: ProbeContext) -> Observation:
    if ctx.api != "chat":
        return Observation.skipped("chat API only")
    rec = await ctx.send(temperature=0, max_tokens=2, logprobs=True)
    end_if(not_answered(rec, "the request"))
    rej = rejected(rec)
    if rej:
        return Observation(value=f"HTTP {rej['status']}", summary=f"rejected: {rej['message'][:80]}")
    n = top_count(rec)
    return Observation(value=n, summary=f"{n} alternatives per token" if n is not None else "no logprobs returned")


@probe(
    id="model.echo",
    title="`model` echoed in the response",
    category="response",
    request="a plain request naming the served model",
    observes="the `model` field of the response",
    breaking=False,
    breaks="clients that check or log response.model see a different name",
)
async def model_echo(ctx: ProbeContext) -> Observation:
    rec = await send_ok(ctx, "request", temperature=0, max_tokens=2)
    echoed = rec.response_model == ctx.model
    return Observation(
        value="echoed" if echoed else "other",
        summary=f"response model {rec.response_model!r}" + ("" if echoed else f" != {ctx.model!r}"),
        detail={"response_model": rec.response_model},
    )


@probe(
    id="length.max_tokens_over_context",
    title="max_tokens larger than the whole context",
    category="length",
    request="a short prompt with max_tokens = twice the context (a client's fixed large cap), temperature 0, "
    "EOS allowed, streamed (read for at most the probe time budget)",
    observes="an error (status) or accepted (generation ends at EOS or the context, or is still running)",
    breaking=True,
    breaks="clients that send one fixed large max_tokens get errors on the new engine (or the reverse)",
)
async def max_tokens_over_context(ctx: ProbeContext) -> Observation:
    if not ctx.context:
        return Observation.skipped("context length unknown (pass --context)")
    asked = ctx.context * 2
    rec = await _bounded_stream(ctx, suppress_eos=False, temperature=0, max_tokens=asked)
    n = _generated(rec)
    detail = {"max_tokens": asked, "context": ctx.context}
    if (rej := rejected(rec)) is not None:
        return Observation(
            value=error_value(rej["status"]),
            summary=f"HTTP {rej['status']}: {rej['message'][:100]}",
            detail={**detail, **rej},
        )
    if rec.failure is not None and rec.failure.kind != FailureKind.TOTAL_TIMEOUT:
        return Observation.failed(rec.failure.message, **detail)
    ended = (
        f"still generating after {ctx.time_budget_s:g} s" if rec.failure is not None else f"finish {rec.finish_reason}"
    )
    return Observation(
        value=LargeCap.ACCEPTED,
        summary=f"accepted: {n} tokens, {ended}",
        detail={**detail, "completion_tokens": n, "finish_reason": rec.finish_reason},
    )


async def _bounded_stream(ctx: ProbeContext, suppress_eos: bool = True, **params: Any) -> RequestRecord:
    """Streamed, capped at the probe time budget, with EOS suppressed (when its id is known and `suppress_eos`) so
    that a random or chatty model runs into the length limit instead of stopping by itself."""
    ends = await ctx.end_tokens() if suppress_eos else None
    if ends:
        params["logit_bias"] = {str(i): -100 for i, _ in ends}
    saved = ctx.client.timeouts
    ctx.client.timeouts = dataclasses.replace(saved, total=ctx.time_budget_s)
    try:
        return await ctx.send(stream=True, **params)
    finally:
        ctx.client.timeouts = saved


def _generated(rec: RequestRecord) -> int:
    if rec.usage and rec.usage.completion_tokens is not None:
        return rec.usage.completion_tokens
    return sum(1 for c in rec.chunk_text if c)


@probe(
    id="max_tokens.omitted",
    title="Length when max_tokens is omitted",
    category="length",
    request="temperature 0, no max_tokens, EOS suppressed by logit_bias, streamed (stopped after the probe "
    "time budget)",
    observes="where generation ends: at a cap, at the context, or not within the budget",
    breaking=True,
    breaks="requests without max_tokens get truncated early, or run (and bill) far longer",
)
async def max_tokens_omitted(ctx: ProbeContext) -> Observation:
    rec = await _bounded_stream(ctx, temperature=0)
    n = _generated(rec)
    prompt = rec.usage.prompt_tokens if rec.usage else None
    detail = {
        "completion_tokens": n,
        "prompt_tokens": prompt,
        "finish_reason": rec.finish_reason,
        "context": ctx.context,
    }
    if rec.failure is not None:
        if rec.failure.kind == FailureKind.TOTAL_TIMEOUT:
            return Observation(
                value="no cap within budget",
                summary=f"still generating after {ctx.time_budget_s:g} s ({n} tokens)",
                detail=detail,
            )
        return Observation.failed(rec.failure.message, **detail)
    if rec.finish_reason == "length":
        if ctx.context and prompt is not None and prompt + n >= ctx.context - 2:
            return Observation(
                value="until context full", summary=f"{n} tokens: until the context was full", detail=detail
            )
        return Observation(value=f"capped at {n}", summary=f"capped at {n} tokens", detail=detail)
    return Observation(
        value="stopped (EOS) before any cap", summary=f"{rec.finish_reason} after {n} tokens", detail=detail
    )


_OVERFLOW = {
    "clamp": Overflow.CLAMPED,
    "finish_length": Overflow.CLAMPED,
    "reject_400": error_value(400),
    "reject_422": error_value(422),
}


@probe(
    id="length.over_context",
    title="prompt + max_tokens over the context",
    category="length",
    request="max_tokens = context - 4 (the prompt is longer than 4 tokens), temperature 0, EOS suppressed, streamed",
    observes="error (status), clamp (finish 'length' at the context) or a silent stop",
    breaking=True,
    breaks="requests that used to be clamped now fail with an error, or the reverse",
    expect=lambda api: _OVERFLOW.get(api.context_overflow),
)
async def over_context(ctx: ProbeContext) -> Observation:
    if not ctx.context:
        return Observation.skipped("context length unknown (pass --context)")
    rec = await _bounded_stream(ctx, temperature=0, max_tokens=ctx.context - 4)
    rej = rejected(rec)
    n = _generated(rec)
    if rej and rec.failure is not None and rec.failure.kind == FailureKind.HTTP_STATUS:
        return Observation(
            value=error_value(rej["status"]), summary=f"HTTP {rej['status']}: {rej['message'][:100]}", detail=rej
        )
    if rec.failure is not None and rec.failure.kind == FailureKind.TOTAL_TIMEOUT:
        return Observation(
            value=Overflow.NO_ERROR_IN_BUDGET,
            summary=f"no error; {n} tokens in {ctx.time_budget_s:g} s",
            detail={"tokens": n},
        )
    if rec.failure is not None:
        return Observation.failed(rec.failure.message)
    prompt = rec.usage.prompt_tokens if rec.usage else None
    value = Overflow.CLAMPED if rec.finish_reason == "length" else Overflow.STOPPED_EARLY
    return Observation(
        value=value,
        summary=f"{value}: {n} tokens, finish {rec.finish_reason}",
        detail={"completion_tokens": n, "prompt_tokens": prompt, "context": ctx.context},
    )
