"""Routing as a pure function: which arm serves a request, and why. No sockets, no clocks, no randomness.

bucket = hash(tenant) mod 10000; a tenant goes to new when bucket < weight × 100. The hash is fixed
(blake2b, no per-process seed), so every replica agrees without talking, and raising the weight only
ever moves tenants from old to new.
"""

from __future__ import annotations

import functools
import hashlib
from dataclasses import dataclass
from typing import Literal

Arm = Literal["old", "new"]
BUCKETS = 10000
ANONYMOUS = "anonymous"


@dataclass(frozen=True, slots=True)
class RequestMeta:
    """What routing needs to know about one request."""

    path: str
    tenant: str  # the tenant hash (see tenant_hash), never the raw header or key
    prompt_tokens_est: int | None = None
    override: str | None = None  # value of X-Switchover-Route, when present


@dataclass(frozen=True, slots=True)
class RouteState:
    """The routing-relevant part of the live config plus the kill-switch latch."""

    weight: float = 0.0  # percent, 0-100
    rollback: bool = False
    killed: bool = False
    max_context_tokens: int | None = None
    bypass_paths: tuple[str, ...] = ()
    override_enabled: bool = False


@dataclass(frozen=True, slots=True)
class Decision:
    """The arm chosen, the reason (a LedgerRecord.route_reason value) and the tenant's bucket."""

    arm: Arm
    reason: str
    bucket: int


@functools.lru_cache(maxsize=16384)  # the same tenants come back: hash each once (pure, so safe to cache)
def tenant_hash(key: str | None) -> str:
    """A stable, non-reversible 16-hex-digit id for a tenant header value or API key."""
    raw = (key or ANONYMOUS).encode("utf-8", "surrogatepass")
    return hashlib.blake2b(raw, digest_size=8, person=b"switchover-gw").hexdigest()


def bucket_of(tenant: str) -> int:
    """The tenant's bucket in [0, 10000)."""
    return int(tenant, 16) % BUCKETS


def threshold(weight: float) -> int:
    """Buckets below this go to new (weight in percent, 0.01 % resolution)."""
    return max(0, min(BUCKETS, round(weight * 100)))


def route(meta: RequestMeta, state: RouteState) -> Decision:
    """Choose the arm. Order: bypass, rollback, kill switch, override, long-context pin, weight."""
    bucket = bucket_of(meta.tenant)
    if any(meta.path.startswith(p) for p in state.bypass_paths):
        return Decision("old", "bypass", bucket)
    if state.rollback:
        return Decision("old", "rollback", bucket)
    if state.killed:
        return Decision("old", "kill_switch", bucket)
    if state.override_enabled and meta.override in ("old", "new"):
        return Decision("new" if meta.override == "new" else "old", "override", bucket)
    if (state.max_context_tokens is not None and meta.prompt_tokens_est is not None
            and meta.prompt_tokens_est > state.max_context_tokens):
        return Decision("old", "pinned_long", bucket)
    return Decision("new" if bucket < threshold(state.weight) else "old", "weight", bucket)
