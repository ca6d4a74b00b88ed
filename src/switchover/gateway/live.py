"""The gateway's live configuration: one immutable snapshot per (re)load, resolved into what the request path
needs. A reload swaps the snapshot whole; in-flight requests keep the one they started with."""

from __future__ import annotations

from dataclasses import dataclass

from switchover.config import Migration
from switchover.errors import BadInput
from switchover.gateway.config import GatewayConfig
from switchover.gateway.policy import RouteState
from switchover.gateway.prompt import PromptEstimator


@dataclass(frozen=True)
class Live:
    """One immutable snapshot of the config; a reload swaps it whole, in-flight requests keep theirs."""

    gw: GatewayConfig
    urls: dict[str, str]
    models: dict[str, str | None]
    keys: dict[str, str | None]
    fail_statuses: frozenset[int]
    estimator: PromptEstimator | None
    states: tuple[RouteState, RouteState] = (RouteState(), RouteState(killed=True))  # (open, killed)

    def route_state(self, killed: bool) -> RouteState:
        return self.states[killed]


def _route_states(gw: GatewayConfig) -> tuple[RouteState, RouteState]:
    """Both RouteStates of a config (kill switch open, latched), built once per config rather than per request."""
    def state(killed: bool) -> RouteState:
        return RouteState(weight=gw.weight, rollback=gw.rollback, killed=killed,
                          max_context_tokens=gw.max_context_tokens, bypass_paths=tuple(gw.bypass_paths),
                          override_enabled=gw.override_header_enabled)
    return state(False), state(True)


def build_live(m: Migration) -> Live:
    """Resolve a validated migration into what the request path needs (API keys read from the environment)."""
    gw = getattr(m, "gateway", None)
    if gw is None:
        raise BadInput("the config has no `gateway:` section")
    est = PromptEstimator(gw.tokenizer, gw.bytes_per_token) if gw.max_context_tokens else None
    return Live(gw=gw, urls={"old": m.old.url, "new": m.new.url}, models={"old": m.old.model, "new": m.new.model},
                keys={"old": m.old.api_key(), "new": m.new.api_key()},
                fail_statuses=frozenset(gw.fallback.statuses), estimator=est, states=_route_states(gw))
