"""The gateway's live configuration: one immutable snapshot per (re)load, resolved into what the request path
needs. A reload swaps the snapshot whole; in-flight requests keep the one they started with."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from urllib.parse import urlsplit

from switchover.config import Migration
from switchover.config.gateway import GatewayConfig
from switchover.errors import BadInput
from switchover.gateway.clients import ClientPolicy
from switchover.gateway.policy import RouteState
from switchover.gateway.prompt import PromptEstimator
from switchover.gateway.review_sampler import LabelCap
from switchover.wire.passthrough import Origin

ARMS = ("old", "new")


@dataclass(frozen=True)
class Upstream:
    """Where one arm's requests go: the origin (host, port, TLS) and the base URL's path prefix. Built from the
    migration file only; a request contributes nothing but its checked path."""

    url: str
    origin: Origin
    prefix: str

    @classmethod
    def of(cls, url: str) -> Upstream:
        return cls(url, Origin.of(url), urlsplit(url).path.rstrip("/"))

    def target(self, upstream_path: str) -> str:
        """The request line's target for a checked path (with query)."""
        return self.prefix + upstream_path


@dataclass(frozen=True)
class Live:
    """One immutable snapshot of the config; a reload swaps it whole, in-flight requests keep theirs."""

    gw: GatewayConfig
    urls: dict[str, str]
    models: dict[str, str | None]
    keys: dict[str, str | None]
    fail_statuses: frozenset[int]
    estimator: PromptEstimator | None
    clients: ClientPolicy = field(default_factory=lambda: ClientPolicy(GatewayConfig().clients))
    upstreams: dict[str, Upstream] = field(default_factory=dict)
    allowed: tuple[str, ...] = ()
    states: tuple[RouteState, RouteState] = (RouteState(), RouteState(killed=True))  # (open, killed)

    def route_state(self, killed: bool) -> RouteState:
        return self.states[killed]

    def engine_key(self, arm: str) -> str | None:
        """The key the gateway sends to an arm: its own in keys / open mode, none in passthrough."""
        return self.keys[arm] if self.clients.adds_engine_keys else None


def _route_states(gw: GatewayConfig) -> tuple[RouteState, RouteState]:
    """Both RouteStates of a config (kill switch open, latched), built once per config rather than per request."""

    def state(killed: bool) -> RouteState:
        return RouteState(
            weight=gw.weight,
            rollback=gw.rollback,
            killed=killed,
            max_context_tokens=gw.max_context_tokens,
            bypass_paths=tuple(gw.bypass_paths),
            override_enabled=gw.override_header_enabled,
        )

    return state(False), state(True)


def build_live(m: Migration, config_dir: Path | None = None) -> Live:
    """Resolve a validated migration into what the request path needs (API keys read from the environment)."""
    gw = getattr(m, "gateway", None)
    if gw is None:
        raise BadInput("the config has no `gateway:` section")
    est = PromptEstimator(gw.tokenizer, gw.bytes_per_token) if gw.max_context_tokens else None
    upstreams = {}
    for arm in ARMS:
        url = getattr(m, arm).url
        try:
            upstreams[arm] = Upstream.of(url)
        except ValueError as exc:
            raise BadInput(f"{arm}.url: {exc}") from None
    return Live(
        gw=gw,
        urls={"old": m.old.url, "new": m.new.url},
        models={"old": m.old.model, "new": m.new.model},
        keys={"old": m.old.api_key(), "new": m.new.api_key()},
        fail_statuses=frozenset(gw.fallback.statuses),
        estimator=est,
        clients=ClientPolicy(gw.clients, config_dir),
        upstreams=upstreams,
        allowed=tuple(gw.allowed_paths),
        states=_route_states(gw),
    )


@dataclass
class Deployment:
    """What every request reads of the running deployment: the live config snapshot (swapped whole on reload), the
    tenant seed (read at start), whether prompts are logged, and the bounded set of task labels."""

    live: Live
    tenant_seed: bytes = b""
    log_prompts: bool = False
    task_labels: LabelCap = field(default_factory=LabelCap)
