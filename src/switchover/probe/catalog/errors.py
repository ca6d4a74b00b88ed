"""Request validation: unknown fields, malformed and invalid requests, unknown model; status and body shape."""

from __future__ import annotations

from typing import Any

from switchover.engines import ApiSemantics
from switchover.probe.catalog._util import end_if, not_answered, refusal, rejected
from switchover.probe.context import ProbeContext
from switchover.probe.registry import probe
from switchover.probe.report import Observation
from switchover.probe.values import Outcome, rejected_value
from switchover.wire import RequestRecord

_ERR_BREAKS = "error handling keyed on status code or error body shape misfires (retries, user messages)"
_SHAPE = {"openai_nested": "nested", "llamacpp_nested": "nested", "openai_flat": "flat", "tgi": "tgi"}


def _error_expected(api: ApiSemantics) -> dict[str, Any]:
    """A refused request's status and error body shape, as the profile states them."""
    return {"status": api.validation_status, "shape": _SHAPE.get(api.error_body)}


def _error_obs(rec: RequestRecord) -> Observation:
    end_if(not_answered(rec, "the request"))
    rej = rejected(rec)
    if rej is None:
        return Observation(value={"status": rec.status or 200, "shape": None}, summary=f"accepted (HTTP {rec.status})")
    body = rec.failure.body if rec.failure else None
    shape = body.shape if body else None
    return Observation(
        value={"status": rej["status"], "shape": shape},
        summary=f"HTTP {rej['status']}, {shape} body: {rej['message'][:80]}",
        detail=rej,
    )


@probe(
    id="request.unknown_field",
    title="Unknown request field",
    category="request",
    request='a normal request plus "switchover_probe_unknown": {"x": 1}',
    observes="rejected (status, body) or silently ignored",
    breaking=True,
    breaks="clients sending vendor extensions get HTTP 400 (or their extension silently dropped)",
    expect=lambda api: (
        rejected_value(api.validation_status) if api.unknown_field_policy == "reject" else Outcome.IGNORED
    ),
)
async def unknown_field(ctx: ProbeContext) -> Observation:
    rec = await ctx.send(temperature=0, max_tokens=2, switchover_probe_unknown={"x": 1})
    return refusal(rec, "the request") or Observation(value=Outcome.IGNORED, summary="accepted and ignored")


@probe(
    id="error.malformed",
    title="Malformed request",
    category="errors",
    request='"messages" (or "prompt") given as a number',
    observes="HTTP status and error body shape",
    breaking=True,
    breaks=_ERR_BREAKS,
    expect=_error_expected,
)
async def malformed(ctx: ProbeContext) -> Observation:
    key = "messages" if ctx.api == "chat" else "prompt"
    body: dict[str, Any] = {"model": ctx.model, key: 12345, "max_tokens": 2}
    rec = await ctx.send(raw=True, **body)
    return _error_obs(rec)


@probe(
    id="error.invalid_value",
    title="Out-of-range value",
    category="errors",
    request="max_tokens = -5",
    observes="HTTP status and error body shape",
    breaking=True,
    breaks=_ERR_BREAKS,
    expect=_error_expected,
)
async def invalid_value(ctx: ProbeContext) -> Observation:
    rec = await ctx.send(temperature=0, max_tokens=-5)
    return _error_obs(rec)


@probe(
    id="error.unknown_model",
    title="Unknown model name",
    category="errors",
    request='model "switchover-no-such-model"',
    observes="HTTP status and error body shape (or accepted)",
    breaking=True,
    breaks="a typo in the model name used to fail loudly and is now served by whatever is loaded (or the reverse)",
    expect=lambda api: {"status": 404} if api.unknown_model_policy == "reject_404" else {"status": 200},
)
async def unknown_model(ctx: ProbeContext) -> Observation:
    body = ctx.body(temperature=0, max_tokens=2)
    body["model"] = "switchover-no-such-model"
    rec = await ctx.send(raw=True, **body)
    return _error_obs(rec)
