"""The Envoy renderer (gateway/envoy/render.py): the route table policy.route's decisions become, the live plane's
xDS files, and a real `envoy --mode validate` accepting what is rendered."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml

from switchover.config import Migration, load_migration
from switchover.export.envoy import validate_with_envoy
from switchover.gateway.envoy.render import (
    CONTROL,
    NEW_THEN_OLD,
    PEER_HEADER,
    Routing,
    XdsFiles,
    arm_addresses,
    route_config,
    static_bootstrap,
)
from tests.export.test_envoy import _envoy

BASE = """\
old: {url: http://127.0.0.1:18001, engine: vllm}
new: {url: http://127.0.0.1:18002, engine: vllm}
gateway:
  data_plane: envoy
  weight: 5
  tenant_header: x-team
  bypass_paths: [/v1/embeddings, /v1/audio]
  allowed_paths: [/v1/chat/completions, /v1/completions, /v1/embeddings]
  shadow: {percent: 10}
"""


@pytest.fixture
def migration(tmp_path: Path) -> Migration:
    p = tmp_path / "switchover.yaml"
    p.write_text(BASE)
    return load_migration(p)


def _routes(rc: dict[str, Any]) -> list[dict[str, Any]]:
    return rc["virtual_hosts"][0]["routes"]


def test_allowed_paths_route_by_weight_bypass_goes_to_old_and_the_rest_is_404(migration) -> None:
    routes = _routes(route_config(migration, Routing(weight=5)))
    names = [(r["name"], next(iter(r["match"].values()))) for r in routes]
    assert names == [
        ("bypass", "/v1/embeddings"),
        ("weight", "/v1/chat/completions"),
        ("weight", "/v1/chat/completions"),
        ("weight", "/v1/completions"),
        ("weight", "/v1/completions"),
        ("not_allowed", "/"),
    ]  # /v1/audio is bypassed but not allowed: 404 as in the built-in gateway
    assert routes[0]["route"]["cluster"] == "old"
    assert routes[-1]["direct_response"]["status"] == 404
    to_new, to_old = routes[1], routes[2]
    # policy.route's test: bucket < weight x 100 goes to new (the Lua filter writes the bucket)
    assert to_new["match"]["dynamic_metadata"] == [
        {
            "filter": "switchover",
            "path": [{"key": "bucket"}],
            "value": {"double_match": {"range": {"start": 0, "end": 500}}},
        }
    ]
    assert to_new["route"]["cluster"] == NEW_THEN_OLD
    assert to_old["route"]["cluster"] == "old" and "dynamic_metadata" not in to_old["match"]
    assert to_new["route"]["request_mirror_policies"][0]["runtime_fraction"]["default_value"]["numerator"] == 100_000


def test_the_lua_filter_runs_before_the_router_and_not_on_control_or_404_routes(migration) -> None:
    lst = static_bootstrap(migration, Routing(weight=5), seed=b"\x01" * 32)["static_resources"]["listeners"][0]
    hcm = lst["filter_chains"][0]["filters"][1]["typed_config"]
    names = [f["name"] for f in hcm["http_filters"]]
    assert names == ["envoy.filters.http.buffer", "envoy.filters.http.lua", "envoy.filters.http.router"]
    assert '"' + "01" * 32 + '"' in hcm["http_filters"][1]["typed_config"]["default_source_code"]["inline_string"]
    routes = _routes(route_config(migration, Routing(weight=5), control=True))
    off = [r["name"] for r in routes if "typed_per_filter_config" in r]
    assert set(off) == {"control", "not_allowed"} and off.count("control") == 4


@pytest.mark.parametrize(
    ("routing", "name", "cluster"),
    [
        (Routing(weight=50, rollback=True), "rollback", "old"),
        (Routing(weight=50, killed=True), "kill_switch", "old"),
        (Routing(weight=0), "weight", "old"),
        (Routing(weight=100), "weight", NEW_THEN_OLD),
    ],
)
def test_rollback_kill_switch_and_edge_weights_route_to_one_cluster_named_after_the_reason(
    migration, routing: Routing, name: str, cluster: str
) -> None:
    canary = _routes(route_config(migration, routing))[1]
    assert canary["name"] == name
    assert canary["route"]["cluster"] == cluster and "dynamic_metadata" not in canary["match"]
    following = _routes(route_config(migration, routing))[2]
    assert following["match"] != canary["match"]  # one route for the prefix, not two


def test_control_paths_go_to_the_plane_with_the_peer_address_stamped_by_envoy(migration) -> None:
    routes = _routes(route_config(migration, Routing(), control=True))
    control = [r for r in routes if r["name"] == "control"]
    assert {r["match"]["path"] for r in control} == {"/health", "/ready", "/admin/state", "/admin/reset"}
    added = control[0]["request_headers_to_add"][0]
    assert added["header"] == {"key": PEER_HEADER, "value": "%DOWNSTREAM_REMOTE_ADDRESS_WITHOUT_PORT%"}
    assert added["append_action"] == "OVERWRITE_IF_EXISTS_OR_ADD"  # a client's own header is replaced
    assert all(r["route"]["cluster"] == CONTROL for r in control)


def test_only_the_route_file_changes_with_the_weight(migration, tmp_path: Path) -> None:
    files = XdsFiles(str(tmp_path))
    a = files.resources(migration, Routing(weight=5), 4000, {"status": "%RESPONSE_CODE%"})
    b = files.resources(migration, Routing(weight=50, killed=True), 4000, {"status": "%RESPONSE_CODE%"})
    assert a["lds.yaml"] == b["lds.yaml"] and a["cds.yaml"] == b["cds.yaml"] and a["rds.yaml"] != b["rds.yaml"]
    hcm = a["lds.yaml"]["resources"][0]["filter_chains"][0]["filters"][1]["typed_config"]
    assert hcm["rds"]["config_source"]["path_config_source"]["watched_directory"] == {"path": str(tmp_path)}


def test_limits_map_to_envoy_settings(migration) -> None:
    lst = static_bootstrap(migration, Routing())["static_resources"]["listeners"][0]
    limit, hcm = (f["typed_config"] for f in lst["filter_chains"][0]["filters"])
    lim = migration.gateway.limits
    assert limit["max_connections"] == lim.max_connections
    assert hcm["http_filters"][0]["typed_config"]["max_request_bytes"] == lim.max_body_bytes
    assert hcm["common_http_protocol_options"]["max_headers_count"] == lim.max_headers
    assert hcm["max_request_headers_kb"] == 32 and hcm["path_with_escaped_slashes_action"] == "REJECT_REQUEST"


def test_arm_addresses_name_each_arm_by_host_and_port(migration) -> None:
    assert arm_addresses(migration) == {"127.0.0.1:18001": "old", "127.0.0.1:18002": "new"}


@pytest.mark.parametrize("routing", [Routing(weight=5), Routing(weight=100), Routing(weight=30, killed=True)])
def test_real_envoy_validates_the_rendered_routes(migration, routing: Routing) -> None:
    binary = _envoy()
    ok, detail = validate_with_envoy(yaml.safe_dump(static_bootstrap(migration, routing)), binary)
    assert ok, detail


def test_idle_upstream_connections_close_before_an_engines_keepalive_timer(migration) -> None:
    arms = [
        c for c in static_bootstrap(migration, Routing())["static_resources"]["clusters"] if c["name"] in ("old", "new")
    ]
    for c in arms:
        opts = c["typed_extension_protocol_options"]["envoy.extensions.upstreams.http.v3.HttpProtocolOptions"]
        assert float(opts["common_http_protocol_options"]["idle_timeout"].rstrip("s")) < 5


def test_the_live_plane_logs_each_failed_try_with_its_own_flags_and_transport_failure(migration, tmp_path) -> None:
    files = XdsFiles(str(tmp_path))
    lds = files.resources(migration, Routing(weight=5), 4000, {"status": "%RESPONSE_CODE%"})["lds.yaml"]
    hcm = lds["resources"][0]["filter_chains"][0]["filters"][1]["typed_config"]
    (log,) = hcm["http_filters"][-1]["typed_config"]["upstream_log"]
    assert log["typed_config"]["path"] == str(tmp_path / "tries.log")
    fields = log["typed_config"]["log_format"]["json_format"]
    assert fields["failure"] == "%UPSTREAM_TRANSPORT_FAILURE_REASON%" and fields["flags"] == "%RESPONSE_FLAGS%"
    assert len(log["filter"]["or_filter"]["filters"]) == 3  # a 5xx, no status (a reset), or any response flag


def test_each_request_to_an_engine_gets_its_own_connection(migration) -> None:
    # a pooled connection the engine closes after an answer (llama-server after every stream) would fail under
    # the next request and fall back to old: tests/gateway/test_envoy_pool.py shows it against such an engine
    for c in static_bootstrap(migration, Routing())["static_resources"]["clusters"]:
        if c["name"] in ("old", "new"):
            opts = c["typed_extension_protocol_options"]["envoy.extensions.upstreams.http.v3.HttpProtocolOptions"]
            assert opts["common_http_protocol_options"]["max_requests_per_connection"] == 1
