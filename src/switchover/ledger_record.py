"""Ledger rows: the contract between the gateway (writer) and the rollout gates and reports (readers).

Two kinds of row, told apart by `kind`: a request row (`LedgerRecord`, written when the client's response
ends; rows without `kind` are request rows) and a shadow row (`ShadowRecord`, written when a mirrored copy
of a request ends, self-contained so a reader needs no join). Never holds prompts (unless --log-prompts) or
secrets. The writers build `RequestRow` / `ShadowRow` (typed, with the same fields, serialised once at write
time); the readers validate lines into the pydantic models."""

from __future__ import annotations

from dataclasses import dataclass, fields
from operator import attrgetter
from typing import Annotated, Any, Literal

import orjson
from pydantic import BaseModel, Field

from switchover.fields import TASK_TYPE, FinishReason

Arm = Literal["old", "new"]
Outcome = Literal[
    "ok",  # the routed arm answered
    "fallback_ok",  # new failed before the first byte; old answered
    "error",  # the client got an error status from an arm
    "failed_mid_stream",  # the upstream broke after the first byte; the client got an SSE error event
    "client_disconnected",  # the client went away; the upstream request was cancelled
    "bad_request",  # the client sent something wrong (400/404/405/408/413/431...); the gateway answered
    "unauthorized",  # 401: missing or unknown client key; the gateway answered
    "refused",  # 503: a connection limit, or draining; the gateway answered
    "drain_cutoff",  # still running when the drain limit at shutdown ended; the client got an SSE error event
    "gateway_error",  # an unexpected exception inside the gateway (500)
]

CLIENT_OUTCOMES: frozenset[str] = frozenset({"bad_request", "unauthorized", "refused"})
"""Requests the gateway answered itself because of what the client did (or when it came)."""

NOT_AN_ARM_OUTCOMES: frozenset[str] = CLIENT_OUTCOMES | {"client_disconnected", "drain_cutoff", "gateway_error"}
"""Outcomes that say nothing about either arm: gates and comparisons never count them as an arm's requests."""

ARM_ERROR_OUTCOMES: frozenset[str] = frozenset({"error", "failed_mid_stream"})
"""Outcomes that count as an error of the arm the policy routed to."""

# The measurements every kind of row carries, defined once: measure/timing.py's formulas, as gateway/observe.py applies
# them. A shadow row's own fields are a copy of its primary's; its `shadow` result times the mirror.
_START = "when the gateway had read the whole request (in a shadow result: when the mirror was sent)"
TtftMs = Annotated[
    float | None,
    Field(
        description=f"Time to first token, ms: from {_START} to the arrival of the first event whose text delta is "
        "non-empty. Streams only: None for a non-streamed answer, or when no text arrived"
    ),
]
TpotMs = Annotated[
    float | None,
    Field(
        description="Time per output token after the first, ms: (e2e_ms - ttft_ms) / (completion_tokens - 1), only "
        "when completion_tokens came from the server's usage and is at least 2; None otherwise"
    ),
]
E2eMs = Annotated[
    float | None,
    Field(
        description=f"End to end, ms: from {_START} to the arrival of the last event carrying choices (a token or the "
        "finish_reason; not a usage-only event, not [DONE]); a non-streamed answer: to the arrival of its "
        "whole body. None: nothing of the kind arrived"
    ),
]
CompletionTokens = Annotated[
    int | None,
    Field(
        description="Output tokens: the server's usage.completion_tokens; in a request row for a stream without "
        "usage, the number of events that carried text (tokens_source 'chunks'). None: not known"
    ),
]
TokensSource = Annotated[
    str | None, Field(description="'usage' (server-reported) or 'chunks' (content events counted; usage was absent)")
]


class ShadowResult(BaseModel):
    """What the mirrored request to the shadow upstream did (never seen by the client)."""

    upstream: str = Field(description="'new' or the name of a third upstream")
    dropped: bool = Field(False, description="Not sent because the shadow concurrency bound was full")
    status: int | None = Field(default=None, description="The shadow upstream's HTTP status; None: no response")
    ttft_ms: TtftMs = None
    tpot_ms: TpotMs = None
    e2e_ms: E2eMs = None
    completion_tokens: CompletionTokens = None
    finish_reason: FinishReason = None
    error: str | None = Field(
        default=None,
        description="Why the mirror failed, as a short label: status_<code>, connect, timeout, "
        "stream_error, malformed, truncated, cancelled, disconnected (...); None: it did not "
        "fail",
    )


class ClientSampling(BaseModel):
    """What the client's request set of the sampling fields (so a comparison can say which requests lean on an
    engine's defaults); never the prompt: a fixed suffix is kept as a keyed hash only."""

    set: list[str] = Field(default_factory=list, description="Sampling fields present in the request, sorted")
    temperature: float | None = None
    top_p: float | None = None
    top_k: int | None = None
    max_tokens: int | None = Field(default=None, description="max_tokens, or max_completion_tokens")
    presence_penalty: float | None = None
    frequency_penalty: float | None = None
    seed: bool = Field(default=False, description="A seed was sent (its value is not kept)")
    response_format: str | None = Field(default=None, description="response_format.type; None: not sent")
    stop: int | None = Field(default=None, description="Stop strings sent (a string counts 1); None: no stop")
    system_suffix: str | None = Field(
        default=None,
        description="Keyed hash (HMAC-SHA256 with the deployment seed, 16 "
        "hex digits) of the last system message's last 64 characters; None: none",
    )
    user_suffix: str | None = Field(
        default=None,
        description="The same of the last user message (a completions "
        "prompt counts as one); equal hashes = the same fixed ending",
    )


class LedgerRecord(BaseModel):
    """One request through the gateway (a request row)."""

    kind: Literal["request"] = "request"
    ts: float = Field(description="Wall-clock time the request arrived (label only)")
    request_id: str
    tenant: str | None = Field(
        None, description="Hash of the tenant key (header value or API key); never the raw value. None: not known"
    )
    bucket: int | None = Field(None, ge=0, lt=10000, description="hash(tenant) mod 10000; None: not known")
    path: str
    routed: Arm | None = Field(None, description="The arm the policy chose; None: refused before routing")
    route_reason: str | None = Field(
        None, description="weight | pinned_long | bypass | override | kill_switch | rollback | draining; None: none"
    )
    arm: Arm | None = Field(None, description="The arm whose response reached the client; None: no arm answered")
    fallback_reason: str | None = Field(None, description="Why new was abandoned before the first byte, if it was")
    outcome: Outcome
    status: int
    stream: bool
    model: str | None = Field(None, description="The model the client asked for")
    ttft_ms: TtftMs = None
    tpot_ms: TpotMs = None
    e2e_ms: E2eMs = None
    prompt_tokens: int | None = Field(default=None, description="The server's usage.prompt_tokens; None: not reported")
    completion_tokens: CompletionTokens = None
    finish_reason: FinishReason = None
    shadowed: bool | None = Field(
        None, description="A mirror was started for this request; its result is a ShadowRecord with this request_id"
    )
    shadow: ShadowResult | None = Field(
        None, description="Legacy: ledgers written by older gateways embed the mirror's result here"
    )
    task_type: str | None = Field(default=None, description=TASK_TYPE)
    json_valid: bool | None = Field(
        None,
        description="The request asked for JSON (response_format): the answer parsed, and matched the schema "
        "when one was given; absent when not asked or not measured",
    )
    cached_tokens: int | None = Field(None, description="usage.prompt_tokens_details.cached_tokens of the answer")
    reviewed: bool | None = Field(
        None, description="Sampled for human review: a pair with this request_id is in the review database"
    )
    prompt: str | None = Field(None, description="Only with --log-prompts")
    # optional fields added by the gateway (readers must tolerate their absence)
    tokens_source: TokensSource = None
    prompt_tokens_est: int | None = Field(None, description="The routing estimate of prompt tokens")
    error: str | None = Field(None, description="Short reason for error / failed_mid_stream (no bodies, no secrets)")
    client: ClientSampling | None = Field(
        None,
        description="The sampling fields the client sent (gateway/ledger.py "
        "client_sampling); None: no JSON body, or older ledgers",
    )


class ShadowRecord(BaseModel):
    """A mirrored request's result next to a copy of its primary's fields (a shadow row)."""

    kind: Literal["shadow"] = "shadow"
    ts: float = Field(description="Wall-clock time the mirror ended (label only)")
    request_id: str = Field(description="The primary's request_id (its request row has shadowed: true)")
    path: str
    routed: Arm | None = Field(None, description="The primary's routed arm")
    arm: Arm | None = Field(None, description="The arm that answered the primary")
    outcome: Outcome = Field(description="The primary's outcome")
    status: int = Field(description="The primary's status")
    stream: bool
    ttft_ms: TtftMs = None
    tpot_ms: TpotMs = None
    e2e_ms: E2eMs = None
    completion_tokens: CompletionTokens = None
    tokens_source: TokensSource = None
    finish_reason: FinishReason = None
    shadow: ShadowResult


LedgerRow = LedgerRecord | ShadowRecord


# Ledger rows as the expression language (switchover/expr.py) sees them: every declared field but the four
# below (`client` is an object). Fields older ledgers lack (task_type, json_valid, cached_tokens, ...) are declared
# with a None default, so they read as null there.
LEFT_OUT = {"kind", "shadow", "prompt", "client"}


def row_fields() -> frozenset[str]:
    """Every field an expression may name."""
    return frozenset(k for k in LedgerRecord.model_fields if k not in LEFT_OUT)


# ---- the write side: a row built through a request's life, serialised once -----------------------------------


@dataclass(slots=True, kw_only=True)
class RequestRow:
    """A request row as the gateway fills it in while the request runs: LedgerRecord's fields (less `kind`, which a
    request row leaves out, and the legacy embedded `shadow`), typed, so a misspelt field fails mypy; a dataclass
    with slots because the gateway makes one per request."""

    ts: float
    request_id: str
    tenant: str | None = None
    bucket: int | None = None
    path: str
    routed: Arm | None = None
    route_reason: str | None = None
    arm: Arm | None = None
    fallback_reason: str | None = None
    outcome: Outcome = "bad_request"
    status: int = 0
    stream: bool = False
    model: str | None = None
    ttft_ms: float | None = None
    tpot_ms: float | None = None
    e2e_ms: float | None = None
    prompt_tokens: int | None = None
    completion_tokens: int | None = None
    finish_reason: str | None = None
    shadowed: bool | None = None
    task_type: str | None = None
    json_valid: bool | None = None
    cached_tokens: int | None = None
    reviewed: bool | None = None
    prompt: str | None = None
    tokens_source: str | None = None
    prompt_tokens_est: int | None = None
    error: str | None = None
    client: dict[str, Any] | None = None  # ClientSampling's fields (gateway/ledger.py client_sampling), nulls kept

    def as_dict(self) -> dict[str, Any]:
        """Every field, None included, in schema order."""
        return dict(zip(_REQUEST_FIELDS, _request_values(self), strict=True))

    def to_json(self) -> bytes:
        """The JSONL line (newline included): fields in schema order, None values left out."""
        values = zip(_REQUEST_FIELDS, _request_values(self), strict=True)
        return orjson.dumps({k: v for k, v in values if v is not None}) + b"\n"


_REQUEST_FIELDS = tuple(f.name for f in fields(RequestRow))
_request_values = attrgetter(*_REQUEST_FIELDS)  # one C call for every field's value


@dataclass(slots=True, kw_only=True)
class ShadowRow:
    """A shadow row as the writers build it: ShadowRecord's fields; the primary's copied when its row is written
    (`of`), the mirror's result and the time added when the mirror ends."""

    ts: float = 0.0
    request_id: str
    path: str
    routed: Arm | None = None
    arm: Arm | None = None
    outcome: Outcome
    status: int
    stream: bool
    ttft_ms: float | None = None
    tpot_ms: float | None = None
    e2e_ms: float | None = None
    completion_tokens: int | None = None
    tokens_source: str | None = None
    finish_reason: str | None = None
    shadow: ShadowResult | None = None

    @classmethod
    def of(cls, primary: RequestRow) -> ShadowRow:
        """The primary's side of a shadow row (its result and time are set when the mirror ends)."""
        return cls(
            request_id=primary.request_id,
            path=primary.path,
            routed=primary.routed,
            arm=primary.arm,
            outcome=primary.outcome,
            status=primary.status,
            stream=primary.stream,
            ttft_ms=primary.ttft_ms,
            tpot_ms=primary.tpot_ms,
            e2e_ms=primary.e2e_ms,
            completion_tokens=primary.completion_tokens,
            tokens_source=primary.tokens_source,
            finish_reason=primary.finish_reason,
        )

    def to_json(self) -> bytes:
        """The JSONL line (newline included): `kind` first, fields in schema order, None values left out (in the
        mirror's result too)."""
        row: dict[str, Any] = {"kind": "shadow"}
        for k, v in zip(_SHADOW_FIELDS, _shadow_values(self), strict=True):
            if v is not None:
                row[k] = v.model_dump(exclude_none=True) if isinstance(v, ShadowResult) else v
        return orjson.dumps(row) + b"\n"


_SHADOW_FIELDS = tuple(f.name for f in fields(ShadowRow))
_shadow_values = attrgetter(*_SHADOW_FIELDS)
