"""Readiness: can this instance generate one token, quickly, right now?

A process that is up but still loading is *not* ready, and neither is one that answers /health but cannot generate
within the budget. How an engine answers while it loads is its profile's `readiness` (engines/data/<engine>.yaml,
cited there): llama.cpp answers 503 with "Loading model"; vLLM, SGLang, TGI and TensorRT-LLM refuse connections
until loaded. Without an engine, an answer is "loading" only when it is some profile's loading answer (named).
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from enum import StrEnum
from typing import Annotated

from pydantic import BaseModel, Field

from switchover.errors import ExitCode
from switchover.wire import EngineClient, FailureKind, Timeouts
from switchover.wire.discovery import list_models, loading_engine, pick_model, profiles_for


class ReadyState(StrEnum):
    READY = "ready"
    REFUSED = "refused"  # nothing listening (or still loading on engines that bind late)
    UNREACHABLE = "unreachable"  # connect timed out
    LOADING = "loading"  # the engine's loading answer (profile readiness: llama.cpp's 503 "Loading model")
    SLOW = "slow"  # generated, but over the budget
    ERROR = "error"  # answered with an error or an empty generation


# what a check found, also as rollout/holding.py keeps it (a line of old_ready.jsonl per check of old)
READY_STATES = (
    "ready; refused: nothing listening (or still loading, on engines that bind late); unreachable: the "
    "connect timed out; loading: the engine's loading answer (its profile's readiness, e.g. llama.cpp's "
    "503 'Loading model'); slow: no token within max_ms (late, or timed out); error: an error answer or "
    "an empty generation"
)
ElapsedMs = Annotated[
    float | None,
    Field(
        description="How long the 1-token greedy completion took, ms; None: it was not sent (/v1/models failed or "
        "listed no model)"
    ),
]


class Readiness(BaseModel):
    """Outcome of one readiness check."""

    url: str
    state: ReadyState = Field(description=READY_STATES)
    ready: bool
    reason: str = Field(description="One line, for humans")
    model: str | None = Field(
        default=None, description="The model checked: as given, else the first /v1/models lists; None: that list failed"
    )
    status: int | None = Field(
        default=None, description="HTTP status of the last answer (the completion, or /v1/models); None: no answer"
    )
    elapsed_ms: ElapsedMs = None
    max_ms: float = Field(description="The budget the completion had to meet, ms")
    tokens: int | None = Field(
        default=None, description="Tokens generated (usage.completion_tokens); None: not reported"
    )

    @property
    def exit_code(self) -> ExitCode:
        if self.ready:
            return ExitCode.OK
        if self.state in (ReadyState.REFUSED, ReadyState.UNREACHABLE):
            return ExitCode.UNREACHABLE
        return ExitCode.FAILED


@dataclass
class _Ctx:
    """What is known so far about one check; `make` turns it into a result."""

    url: str
    max_ms: float
    model: str | None = None
    elapsed_ms: float | None = None
    status: int | None = None

    def make(
        self, state: ReadyState, ready: bool, reason: str, status: int | None = None, tokens: int | None = None
    ) -> Readiness:
        return Readiness(
            url=self.url,
            state=state,
            ready=ready,
            reason=reason,
            model=self.model,
            status=status if status is not None else self.status,
            elapsed_ms=self.elapsed_ms,
            max_ms=self.max_ms,
            tokens=tokens,
        )


async def check_ready(
    url: str,
    *,
    model: str | None = None,
    max_ms: float = 5000.0,
    api_key_env: str | None = None,
    connect_timeout_s: float = 2.0,
    engine: str | None = None,
    engine_version: str | None = None,
) -> Readiness:
    """Discover the model if not given, then time a 1-token greedy completion against `max_ms`; a loading answer is
    told by `engine`'s profile (no engine: by whichever profile's it is)."""
    profiles = profiles_for(engine, engine_version)
    budget_s = max(max_ms / 1000.0, 0.001)
    # the generation is allowed 4x the budget so that "slow" can be told apart from "hung"
    timeouts = Timeouts(
        connect=connect_timeout_s, first_byte=budget_s * 4 + 1, idle=budget_s * 4 + 1, total=budget_s * 4 + 1
    )
    ctx = _Ctx(url=url, max_ms=max_ms)
    async with EngineClient(url, api_key_env=api_key_env, timeouts=timeouts) as client:
        if model is None:
            listing = await list_models(client, budget_s * 4 + 1)
            if listing.failure is not None:
                return _from_failure(ctx, listing.failure.kind, listing.failure.message)
            if listing.status != 200:
                who = loading_engine(listing.status, listing.text, profiles)
                if who is not None:
                    return ctx.make(
                        ReadyState.LOADING,
                        ready=False,
                        status=listing.status,
                        reason=f"loading ({who}'s loading answer): /v1/models answered {listing.status} "
                        f"{listing.text[:120]}",
                    )
                return ctx.make(
                    ReadyState.ERROR,
                    ready=False,
                    status=listing.status,
                    reason=f"/v1/models answered {listing.status}: {listing.text[:120]}",
                )
            model = pick_model(listing, None)
            if model is None:
                return ctx.make(
                    ReadyState.ERROR,
                    ready=False,
                    status=listing.status,
                    reason="/v1/models lists no model; pass --model",
                )
        t0 = time.perf_counter_ns()
        rec = await client.complete("Hello", model=model, max_tokens=1, temperature=0)
        elapsed = (time.perf_counter_ns() - t0) / 1e6
    ctx.model, ctx.elapsed_ms, ctx.status = model, round(elapsed, 2), rec.status
    if rec.failure is not None:
        f = rec.failure
        who = loading_engine(f.status, f.message, profiles) if f.kind == FailureKind.HTTP_STATUS else None
        if who is not None:
            return ctx.make(ReadyState.LOADING, ready=False, reason=f"loading ({who}'s loading answer): {f.message}")
        if f.kind in (FailureKind.FIRST_BYTE_TIMEOUT, FailureKind.TOTAL_TIMEOUT, FailureKind.IDLE_TIMEOUT):
            return ctx.make(
                ReadyState.SLOW, ready=False, reason=f"no token within {elapsed:.0f} ms (budget {max_ms:g} ms)"
            )
        return _from_failure(ctx, f.kind, f.message)
    tokens = rec.usage.completion_tokens if rec.usage else None
    if tokens == 0 or (tokens is None and not rec.text):
        return ctx.make(
            ReadyState.ERROR, ready=False, tokens=tokens, reason="the server answered but generated no token"
        )
    if elapsed > max_ms:
        return ctx.make(
            ReadyState.SLOW,
            ready=False,
            tokens=tokens,
            reason=f"1 token took {elapsed:.0f} ms, over the {max_ms:g} ms budget",
        )
    return ctx.make(
        ReadyState.READY,
        ready=True,
        tokens=tokens,
        reason=f"generated 1 token in {elapsed:.0f} ms with model {model!r}",
    )


def _from_failure(ctx: _Ctx, kind: FailureKind, message: str) -> Readiness:
    if kind == FailureKind.CONNECT:
        return ctx.make(ReadyState.REFUSED, ready=False, reason=message)
    if kind == FailureKind.CONNECT_TIMEOUT:
        return ctx.make(ReadyState.UNREACHABLE, ready=False, reason=message)
    if kind in (FailureKind.FIRST_BYTE_TIMEOUT, FailureKind.TOTAL_TIMEOUT):
        return ctx.make(ReadyState.SLOW, ready=False, reason=message)
    return ctx.make(ReadyState.ERROR, ready=False, reason=message)
