"""Routing as a pure function: which arm serves a request, and why. No sockets, no clocks, no randomness.

bucket = hash(seed, tenant) mod 10000; a tenant goes to new when bucket < weight × 100. The hash is keyed by the
deployment's secret seed (blake2b; clients.deployment_seed), so nobody outside can pick tenant ids that land on
new; within a deployment it is fixed, so every replica sharing the seed agrees without talking, a tenant stays on
its arm at a given weight, and raising the weight only ever moves tenants from old to new.
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
    client: str | None = None  # who the kill switch counts it as (clients.ClientPolicy.counted_as); None: nobody known


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
    """The arm chosen, the reason (a LedgerRecord.route_reason value), the tenant's bucket, and the client the
    outcome is counted for (carried from RequestMeta)."""

    arm: Arm
    reason: str
    bucket: int
    client: str | None = None


@functools.lru_cache(maxsize=16384)  # the same tenants come back: hash each once (pure, so safe to cache)
def tenant_hash(key: str | None, seed: bytes = b"") -> str:
    """A 16-hex-digit id for a tenant, keyed by the deployment's seed: stable within the deployment, and neither
    reversible nor predictable without the seed (an empty seed gives the public, unkeyed hash)."""
    raw = (key or ANONYMOUS).encode("utf-8", "surrogatepass")
    return hashlib.blake2b(raw, digest_size=8, key=seed, person=b"switchover-gw").hexdigest()


def bucket_of(tenant: str) -> int:
    """The tenant's bucket in [0, 10000)."""
    return int(tenant, 16) % BUCKETS


def threshold(weight: float) -> int:
    """Buckets below this go to new (weight in percent, 0.01 % resolution)."""
    return max(0, min(BUCKETS, round(weight * 100)))


def route(meta: RequestMeta, state: RouteState) -> Decision:
    """Choose the arm. Order: bypass, rollback, kill switch, override, long-context pin, weight."""
    bucket = bucket_of(meta.tenant)
    client = meta.client
    if any(meta.path.startswith(p) for p in state.bypass_paths):
        return Decision("old", "bypass", bucket, client)
    if state.rollback:
        return Decision("old", "rollback", bucket, client)
    if state.killed:
        return Decision("old", "kill_switch", bucket, client)
    if state.override_enabled and meta.override in ("old", "new"):
        return Decision("new" if meta.override == "new" else "old", "override", bucket, client)
    if (
        state.max_context_tokens is not None
        and meta.prompt_tokens_est is not None
        and meta.prompt_tokens_est > state.max_context_tokens
    ):
        return Decision("old", "pinned_long", bucket, client)
    return Decision("new" if bucket < threshold(state.weight) else "old", "weight", bucket, client)
