"""One ledger row per request the gateway served: the contract between the gateway (writer) and the
rollout gates and reports (readers). Never holds prompts (unless --log-prompts) or secrets."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, Field

Arm = Literal["old", "new"]
Outcome = Literal[
    "ok",  # the routed arm answered
    "fallback_ok",  # new failed before the first byte; old answered
    "error",  # the client got an error status
    "failed_mid_stream",  # the upstream broke after the first byte; the client got an SSE error event
    "client_disconnected",  # the client went away; the upstream request was cancelled
]


class ShadowResult(BaseModel):
    """What the mirrored request to the shadow upstream did (never seen by the client)."""

    upstream: str = Field(description="'new' or the name of a third upstream")
    dropped: bool = Field(False, description="Not sent because the shadow concurrency bound was full")
    status: int | None = None
    ttft_ms: float | None = None
    tpot_ms: float | None = None
    e2e_ms: float | None = None
    completion_tokens: int | None = None
    finish_reason: str | None = None
    error: str | None = None


class LedgerRecord(BaseModel):
    """One request through the gateway."""

    ts: float = Field(description="Wall-clock time the request arrived (label only)")
    request_id: str
    tenant: str = Field(description="Hash of the tenant key (header value or API key); never the raw value")
    bucket: int = Field(ge=0, lt=10000, description="hash(tenant) mod 10000")
    path: str
    routed: Arm = Field(description="The arm the policy chose")
    route_reason: str = Field(description="weight | pinned_long | bypass | override | kill_switch | rollback")
    arm: Arm = Field(description="The arm whose response reached the client")
    fallback_reason: str | None = Field(None, description="Why new was abandoned before the first byte, if it was")
    outcome: Outcome
    status: int
    stream: bool
    model: str | None = Field(None, description="The model the client asked for")
    ttft_ms: float | None = None
    tpot_ms: float | None = None
    e2e_ms: float | None = None
    prompt_tokens: int | None = None
    completion_tokens: int | None = None
    finish_reason: str | None = None
    shadow: ShadowResult | None = None
    prompt: str | None = Field(None, description="Only with --log-prompts")
    # optional fields added by the gateway (readers must tolerate their absence)
    tokens_source: str | None = Field(
        None, description="'usage' (server-reported) or 'chunks' (content events counted; usage was absent)"
    )
    prompt_tokens_est: int | None = Field(None, description="The routing estimate of prompt tokens")
    error: str | None = Field(None, description="Short reason for error / failed_mid_stream (no bodies, no secrets)")
