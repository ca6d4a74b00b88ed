"""policy.route: a table of decisions, and the property that raising the weight only moves tenants old → new."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from switchover.gateway.policy import BUCKETS, RequestMeta, RouteState, bucket_of, route, tenant_hash, threshold

LOW = "tenant-a"  # fixed tenants; their buckets are asserted below so a hash change is caught
T_LOW_BUCKET = bucket_of(tenant_hash(LOW))


def meta(
    path: str = "/v1/chat/completions", tenant: str = LOW, est: int | None = None, override: str | None = None
) -> RequestMeta:
    return RequestMeta(path, tenant_hash(tenant), est, override)


def test_tenant_hash_is_stable_across_processes_and_never_the_raw_key():
    assert tenant_hash("tenant-a") == tenant_hash("tenant-a")
    assert tenant_hash("tenant-a") != tenant_hash("tenant-b")
    assert "tenant" not in tenant_hash("tenant-a") and len(tenant_hash("x")) == 16
    # a pinned value: replicas (and the rollout helper) must agree on buckets forever
    assert tenant_hash("tenant-a") == "133db6ec8c1bf308"
    assert tenant_hash(None) == tenant_hash("") == tenant_hash("anonymous")


@pytest.mark.parametrize(
    ("weight", "expected"), [(0, 0), (0.01, 1), (5, 500), (20, 2000), (33.333, 3333), (100, BUCKETS)]
)
def test_threshold_is_weight_times_100(weight, expected):
    assert threshold(weight) == expected


B = T_LOW_BUCKET
CASES = [
    # (state, meta kwargs, arm, reason)
    (RouteState(weight=100), {}, "new", "weight"),
    (RouteState(weight=0), {}, "old", "weight"),
    (RouteState(weight=(B + 1) / 100), {}, "new", "weight"),  # bucket just under the threshold
    (RouteState(weight=B / 100), {}, "old", "weight"),  # bucket == threshold stays old
    (RouteState(weight=100, rollback=True), {}, "old", "rollback"),
    (RouteState(weight=100, killed=True), {}, "old", "kill_switch"),
    (RouteState(weight=100, bypass_paths=("/v1/embeddings",)), {"path": "/v1/embeddings"}, "old", "bypass"),
    (RouteState(weight=100, bypass_paths=("/v1/embeddings",)), {}, "new", "weight"),
    (RouteState(weight=100, max_context_tokens=100), {"est": 101}, "old", "pinned_long"),
    (RouteState(weight=100, max_context_tokens=100), {"est": 100}, "new", "weight"),
    (RouteState(weight=100, max_context_tokens=100), {"est": None}, "new", "weight"),
    (RouteState(weight=0, override_enabled=True), {"override": "new"}, "new", "override"),
    (RouteState(weight=100, override_enabled=True), {"override": "old"}, "old", "override"),
    (RouteState(weight=0, override_enabled=False), {"override": "new"}, "old", "weight"),
    (RouteState(weight=0, override_enabled=True), {"override": "bogus"}, "old", "weight"),
    # safety beats testing: rollback and the kill switch win over the override header
    (RouteState(weight=100, rollback=True, override_enabled=True), {"override": "new"}, "old", "rollback"),
    (RouteState(weight=100, killed=True, override_enabled=True), {"override": "new"}, "old", "kill_switch"),
    (RouteState(weight=100, rollback=True, bypass_paths=("/v1/emb",)), {"path": "/v1/embeddings"}, "old", "bypass"),
]


@pytest.mark.parametrize(("state", "kw", "arm", "reason"), CASES)
def test_route_table(state, kw, arm, reason):
    d = route(meta(**kw), state)
    assert (d.arm, d.reason, d.bucket) == (arm, reason, B)


@settings(deadline=None, max_examples=100)  # no per-example deadline: the machine may be loaded
@given(
    tenants=st.lists(st.text(min_size=1, max_size=20), min_size=1, max_size=50),
    w1=st.floats(0, 100),
    w2=st.floats(0, 100),
)
def test_raising_the_weight_only_moves_tenants_from_old_to_new(tenants, w1, w2):
    lo, hi = sorted((w1, w2))
    for t in tenants:
        a = route(meta(tenant=t), RouteState(weight=lo)).arm
        b = route(meta(tenant=t), RouteState(weight=hi)).arm
        assert not (a == "new" and b == "old")


def test_weight_shares_are_close_to_the_weight():
    n = 20000
    for w in (5, 20, 50):
        new = sum(route(meta(tenant=f"t{i}"), RouteState(weight=w)).arm == "new" for i in range(n))
        assert abs(new / n - w / 100) < 0.015
