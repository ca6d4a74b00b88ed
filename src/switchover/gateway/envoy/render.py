"""Envoy configuration for switchover's routing, rendered once for both uses: `export envoy` (one static
bootstrap) and the live data plane (a bootstrap whose listener, routes and clusters come from files, swapped by
atomic rename; Envoy reloads a path_config_source when a file is moved onto it:
https://www.envoyproxy.io/docs/envoy/v1.40.0/api-v3/config/core/v3/config_source.proto).

The routes are what policy.route decides, in Envoy's words: bypass paths pinned to old, the canary weight as a
route to new for the tenant buckets below the weight (the bucket is policy.bucket_of(policy.tenant_hash(tenant,
seed)), computed by the Lua filter, lua.py, into dynamic metadata that RouteMatch.dynamic_metadata reads:
https://www.envoyproxy.io/docs/envoy/v1.40.0/api-v3/config/route/v3/route_components.proto) and to old for the
others, new as an aggregate cluster [new, old] so a try that fails on new before the response headers is retried
on old, mirroring, and a 404 for paths outside gateway.allowed_paths. Rollback and the kill switch are a route to
old, named after the reason.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit

from switchover.config import Migration
from switchover.config.gateway import GatewayConfig
from switchover.errors import BadInput
from switchover.gateway.envoy import lua

ROUTER = "type.googleapis.com/envoy.extensions.filters.http.router.v3.Router"
BUFFER = "type.googleapis.com/envoy.extensions.filters.http.buffer.v3.Buffer"
HCM = "type.googleapis.com/envoy.extensions.filters.network.http_connection_manager.v3.HttpConnectionManager"
CONN_LIMIT = "type.googleapis.com/envoy.extensions.filters.network.connection_limit.v3.ConnectionLimit"
AGGREGATE = "type.googleapis.com/envoy.extensions.clusters.aggregate.v3.ClusterConfig"
TLS = "type.googleapis.com/envoy.extensions.transport_sockets.tls.v3.UpstreamTlsContext"
STDOUT_LOG = "type.googleapis.com/envoy.extensions.access_loggers.stream.v3.StdoutAccessLog"
LISTENER = "type.googleapis.com/envoy.config.listener.v3.Listener"
ROUTES = "type.googleapis.com/envoy.config.route.v3.RouteConfiguration"
CLUSTER = "type.googleapis.com/envoy.config.cluster.v3.Cluster"
PREVIOUS_PRIORITIES = (
    "type.googleapis.com/envoy.extensions.retry.priority.previous_priorities.v3.PreviousPrioritiesConfig"
)

TRIES_LOG = "tries.log"  # the live plane's failed tries, beside the xDS files
HTTP_OPTIONS = "type.googleapis.com/envoy.extensions.upstreams.http.v3.HttpProtocolOptions"
UPSTREAM_IDLE = "2s"
NEW_THEN_OLD = "new_then_old"  # the aggregate cluster: new, and old when a try on new failed
CONTROL = "switchover_control"  # the plane's own endpoint (state, reset, health), on loopback
CONTROL_PATHS = ("/health", "/ready", "/admin/state", "/admin/reset")
PEER_HEADER = "x-switchover-peer"  # set by Envoy from the connection, never taken from the client
BUCKETS = 10_000  # weights in basis points, as policy.threshold: 5 % -> 500 of 10000
MAX_BUFFER = (1 << 32) - 1  # the buffer filter's max_request_bytes is a uint32


@dataclass(frozen=True)
class Routing:
    """The routing-relevant state: the config's weight and rollback, and the kill-switch latch."""

    weight: float = 0.0
    rollback: bool = False
    killed: bool = False

    @property
    def reason(self) -> str:
        """The route_reason of canary-path requests (a LedgerRecord.route_reason value)."""
        return "rollback" if self.rollback else "kill_switch" if self.killed else "weight"

    @property
    def new_share(self) -> int:
        """Buckets (of 10000) routed to new."""
        return 0 if self.rollback or self.killed else max(0, min(BUCKETS, round(self.weight * 100)))


def _secs(ms: float) -> str:
    return f"{ms / 1000:.3f}s"


def _endpoint(url: str, what: str) -> tuple[str, int, bool]:
    parts = urlsplit(url)
    if not parts.hostname:
        raise BadInput(f"{what}.url {url!r} has no host")
    tls = parts.scheme == "https"
    return parts.hostname, parts.port or (443 if tls else 80), tls


def arm_addresses(migration: Migration) -> dict[str, str]:
    """'host:port' of each arm as Envoy's %UPSTREAM_HOST% names it (for an IP literal; a DNS name resolves)."""
    out = {}
    for arm in ("old", "new"):
        host, port, _ = _endpoint(getattr(migration, arm).url, arm)
        out[f"[{host}]:{port}" if ":" in host else f"{host}:{port}"] = arm
    return out


def _static_cluster(name: str, host: str, port: int, connect_ms: float, tls: bool = False) -> dict[str, Any]:
    is_ip = host.replace(".", "").isdigit() or ":" in host
    c: dict[str, Any] = {
        "name": name,
        "type": "STATIC" if is_ip else "STRICT_DNS",
        "connect_timeout": _secs(connect_ms),
        "load_assignment": {
            "cluster_name": name,
            "endpoints": [
                {"lb_endpoints": [{"endpoint": {"address": {"socket_address": {"address": host, "port_value": port}}}}]}
            ],
        },
    }
    if tls:
        c["transport_socket"] = {"name": "envoy.transport_sockets.tls", "typed_config": {"@type": TLS, "sni": host}}
    # One request per upstream connection: an engine may close a connection right after a complete answer without
    # `Connection: close` (llama-server at b11434 closes after every streamed answer: its chunked content provider
    # returns false after sink.done(), which cpp-httplib takes for a cancelled write,
    # https://github.com/ggml-org/llama.cpp/blob/b11434/tools/server/server-http.cpp and
    # vendor/cpp-httplib/httplib.cpp write_content_chunked), or when its keep-alive timer fires (5 s in uvicorn and
    # cpp-httplib). A pooled connection reused in that window fails under the next request (UC, no status), and on
    # new the retry goes to old: a fallback new never earned. The built-in gateway resends such a request on a
    # fresh connection to the same arm; Envoy cannot retry on the same arm before old, so it never reuses one.
    c["typed_extension_protocol_options"] = {
        "envoy.extensions.upstreams.http.v3.HttpProtocolOptions": {
            "@type": HTTP_OPTIONS,
            "common_http_protocol_options": {"idle_timeout": UPSTREAM_IDLE, "max_requests_per_connection": 1},
            "explicit_http_config": {"http_protocol_options": {}},
        }
    }
    return c


def clusters(migration: Migration, control_port: int | None = None) -> list[dict[str, Any]]:
    """old, new, the aggregate new_then_old and (live plane) the control endpoint's cluster."""
    gw = migration.gateway or GatewayConfig()
    connect_ms = gw.timeouts.connect_ms
    out = [
        _static_cluster(
            arm,
            *_endpoint(getattr(migration, arm).url, arm)[:2],
            connect_ms,
            _endpoint(getattr(migration, arm).url, arm)[2],
        )
        for arm in ("old", "new")
    ]
    out.append(
        {
            "name": NEW_THEN_OLD,
            "connect_timeout": _secs(connect_ms),
            "lb_policy": "CLUSTER_PROVIDED",
            "cluster_type": {
                "name": "envoy.clusters.aggregate",
                "typed_config": {"@type": AGGREGATE, "clusters": ["new", "old"]},
            },
        }
    )
    if control_port is not None:
        out.append(_static_cluster(CONTROL, "127.0.0.1", control_port, 1000))
    return out


def _retry(gw: GatewayConfig) -> dict[str, Any]:
    return {
        "retry_on": "connect-failure,refused-stream,reset,retriable-status-codes",
        "retriable_status_codes": list(gw.fallback.statuses),
        "num_retries": 1,
        "per_try_idle_timeout": _secs(gw.fallback.on_timeout_ms),
        # after a try on new (priority 0 of the aggregate) the retry goes to the next priority: old
        "retry_priority": {
            "name": "envoy.retry_priorities.previous_priorities",
            "typed_config": {"@type": PREVIOUS_PRIORITIES, "update_frequency": 1},
        },
    }


def _match(prefix: str) -> dict[str, str]:
    """A whole-segment prefix match (as gateway.allowed_paths / bypass_paths are read)."""
    return {"prefix": "/"} if prefix == "/" else {"path_separated_prefix": prefix}


def _under(path: str, prefix: str) -> bool:
    return prefix == "/" or path == prefix or path.startswith(prefix + "/")


def _canary(gw: GatewayConfig, cluster: str, mirror_to: str) -> dict[str, Any]:
    route: dict[str, Any] = {
        "cluster": cluster,
        "timeout": "0s",
        "idle_timeout": _secs(gw.timeouts.idle_ms),
        "retry_policy": _retry(gw),
    }
    if gw.shadow.percent > 0:
        route["request_mirror_policies"] = [
            {
                "cluster": mirror_to,
                "runtime_fraction": {
                    "default_value": {"numerator": round(gw.shadow.percent * 10_000), "denominator": "MILLION"},
                    "runtime_key": "switchover.shadow_percent",
                },
            }
        ]
    return route


def _below(share: int) -> dict[str, Any]:
    """Matches a request whose tenant bucket (set by the Lua filter) is below `share`, as policy.route's test."""
    return {
        "filter": lua.NAMESPACE,
        "path": [{"key": "bucket"}],
        "value": {"double_match": {"range": {"start": 0, "end": share}}},
    }


def _weighted(gw: GatewayConfig, routing: Routing, prefix: str, mirror_to: str) -> list[dict[str, Any]]:
    """The canary routes of one allowed prefix: buckets below the weight to new (then old), the rest to old."""
    share = routing.new_share
    if share in (0, BUCKETS):
        cluster = NEW_THEN_OLD if share == BUCKETS else "old"
        return [{"name": routing.reason, "match": _match(prefix), "route": _canary(gw, cluster, mirror_to)}]
    return [
        {
            "name": routing.reason,
            "match": {**_match(prefix), "dynamic_metadata": [_below(share)]},
            "route": _canary(gw, NEW_THEN_OLD, mirror_to),
        },
        {"name": routing.reason, "match": _match(prefix), "route": _canary(gw, "old", mirror_to)},
    ]


LUA_OFF = {"envoy.filters.http.lua": {"@type": lua.LUA_PER_ROUTE, "disabled": True}}


def route_config(migration: Migration, routing: Routing, *, control: bool = False) -> dict[str, Any]:
    """The route table: control paths (live plane), bypass paths to old, allowed paths by weight, else 404. With
    `control` (the live plane) mirrored copies go to the control endpoint, which replays them on new and measures."""
    gw = migration.gateway or GatewayConfig()
    routes: list[dict[str, Any]] = []
    if control:
        peer = {
            "header": {"key": PEER_HEADER, "value": "%DOWNSTREAM_REMOTE_ADDRESS_WITHOUT_PORT%"},
            "append_action": "OVERWRITE_IF_EXISTS_OR_ADD",
        }
        routes += [
            {
                "name": "control",
                "match": {"path": p},
                "request_headers_to_add": [peer],
                "route": {"cluster": CONTROL, "timeout": "10s"},
                "typed_per_filter_config": LUA_OFF,
            }
            for p in CONTROL_PATHS
        ]
    allowed = gw.allowed_paths
    pinned = [a for a in allowed if any(_under(a, b) for b in gw.bypass_paths)]
    pinned += [b for b in gw.bypass_paths if b not in pinned and any(_under(b, a) for a in allowed)]
    routes += [
        {"name": "bypass", "match": _match(p), "route": {"cluster": "old", "timeout": "0s"}}
        for p in sorted(pinned, key=len, reverse=True)
    ]
    # the live plane mirrors to its control endpoint, which measures the copy on new (mirror.py); the export to new
    mirror_to = CONTROL if control else "new"
    for a in sorted(allowed, key=len, reverse=True):
        if a not in pinned:
            routes += _weighted(gw, routing, a, mirror_to)
    routes.append(
        {
            "name": "not_allowed",
            "match": {"prefix": "/"},
            "typed_per_filter_config": LUA_OFF,
            "direct_response": {
                "status": 404,
                "body": {
                    "inline_string": '{"error": {"message": "path not served by this gateway", "type": "not_found"}}'
                },
            },
        }
    )
    return {"name": "switchover", "virtual_hosts": [{"name": "llm", "domains": ["*"], "routes": routes}]}


FILE_LOG = "type.googleapis.com/envoy.extensions.access_loggers.file.v3.FileAccessLog"
# one line per failed try (the router's upstream_log: each try's own flags and transport failure, which the
# request's line does not keep once a retry on old answered)
TRY_FIELDS = {
    "ts": "%START_TIME(%s.%6f)%",
    "request_id": "%REQ(X-REQUEST-ID)%",
    "host": "%UPSTREAM_HOST%",
    "attempt": "%UPSTREAM_REQUEST_ATTEMPT_COUNT%",
    "status": "%RESPONSE_CODE%",
    "flags": "%RESPONSE_FLAGS%",
    "details": "%RESPONSE_CODE_DETAILS%",
    "failure": "%UPSTREAM_TRANSPORT_FAILURE_REASON%",
    "connection": "%UPSTREAM_CONNECTION_ID%",
    "local": "%UPSTREAM_LOCAL_ADDRESS%",
    "first_byte_ms": "%RESPONSE_DURATION%",
}


def _status_filter(op: str, value: int) -> dict[str, Any]:
    cmp = {"op": op, "value": {"default_value": value, "runtime_key": f"switchover.try_log_{op.lower()}"}}
    return {"status_code_filter": {"comparison": cmp}}


def tries_log(path: str) -> list[dict[str, Any]]:
    """The router's upstream_log: failed tries (a 5xx, no status, or any response flag) as JSON lines in `path`
    (https://www.envoyproxy.io/docs/envoy/v1.40.0/api-v3/extensions/filters/http/router/v3/router.proto)."""
    failed = [_status_filter("GE", 500), _status_filter("EQ", 0), {"response_flag_filter": {}}]
    return [
        {
            "name": "envoy.access_loggers.file",
            "filter": {"or_filter": {"filters": failed}},
            "typed_config": {"@type": FILE_LOG, "path": path, "log_format": {"json_format": TRY_FIELDS}},
        }
    ]


def _hcm(
    gw: GatewayConfig, routes: dict[str, Any], access_log: list[dict[str, Any]], seed: bytes, tries: str | None
) -> dict[str, Any]:
    lim = gw.limits
    return {
        "@type": HCM,
        "stat_prefix": "switchover",
        **routes,
        "http_filters": [
            # the whole body is held before a try starts (as the built-in gateway does), so a retry on old can
            # replay it; over the limit: 413
            {
                "name": "envoy.filters.http.buffer",
                "typed_config": {"@type": BUFFER, "max_request_bytes": min(lim.max_body_bytes, MAX_BUFFER)},
            },
            # the tenant's bucket (routing), usage asked for on streams, and old's / new's answer read (lua.py)
            {
                "name": "envoy.filters.http.lua",
                "typed_config": {
                    "@type": lua.LUA,
                    "default_source_code": {"inline_string": lua.script(seed, gw.tenant_header)},
                },
            },
            {
                "name": "envoy.filters.http.router",
                "typed_config": {"@type": ROUTER, **({"upstream_log": tries_log(tries)} if tries else {})},
            },
        ],
        "access_log": access_log,
        "use_remote_address": True,  # x-forwarded-for from a client is not trusted
        "normalize_path": True,
        "merge_slashes": True,
        "path_with_escaped_slashes_action": "REJECT_REQUEST",
        "stream_idle_timeout": _secs(gw.timeouts.idle_ms),
        "request_headers_timeout": f"{lim.header_timeout_s:.3f}s",
        "request_timeout": f"{lim.header_timeout_s + lim.body_timeout_s:.3f}s",
        "max_request_headers_kb": max(1, min(8192, math.ceil(lim.max_head_bytes / 1024))),
        "common_http_protocol_options": {
            "idle_timeout": f"{lim.keepalive_timeout_s:.3f}s",
            "max_headers_count": lim.max_headers,
            "max_requests_per_connection": lim.keepalive_requests,
        },
        "drain_timeout": f"{max(gw.drain_seconds, 0.001):.3f}s",
    }


def listener(
    migration: Migration,
    routes: dict[str, Any],
    *,
    port: int | None = None,
    access_log: list[dict[str, Any]] | None = None,
    seed: bytes = b"",
    tries: str | None = None,
) -> dict[str, Any]:
    """The one listener: a connection cap, then the HTTP connection manager with `routes` (inline or via RDS)."""
    gw = migration.gateway or GatewayConfig()
    return {
        "name": "switchover",
        "address": {
            "socket_address": {"address": gw.listen.host, "port_value": gw.listen.port if port is None else port}
        },
        "filter_chains": [
            {
                "filters": [
                    {
                        "name": "envoy.filters.network.connection_limit",
                        "typed_config": {
                            "@type": CONN_LIMIT,
                            "stat_prefix": "switchover",
                            "max_connections": gw.limits.max_connections,
                        },
                    },
                    {
                        "name": "envoy.filters.network.http_connection_manager",
                        "typed_config": _hcm(gw, routes, access_log or [], seed, tries),
                    },
                ]
            }
        ],
    }


def stdout_access_log(fields: dict[str, str]) -> list[dict[str, Any]]:
    """Envoy's JSON access log on its stdout (read by the plane through a pipe; never a file of its own)."""
    return [
        {
            "name": "envoy.access_loggers.stdout",
            "typed_config": {"@type": STDOUT_LOG, "log_format": {"json_format": fields}},
        }
    ]


def static_bootstrap(
    migration: Migration, routing: Routing, *, listen_port: int | None = None, admin_port: int = 9901, seed: bytes = b""
) -> dict[str, Any]:
    """One self-contained bootstrap (what `export envoy` prints); tenant buckets keyed by `seed`."""
    routes = {"route_config": route_config(migration, routing)}
    return {
        "admin": {"address": {"socket_address": {"address": "127.0.0.1", "port_value": admin_port}}},
        "static_resources": {
            "listeners": [listener(migration, routes, port=listen_port, seed=seed)],
            "clusters": clusters(migration),
        },
    }


def _source(path: str, directory: str) -> dict[str, Any]:
    # watched_directory: a file moved into the directory reloads the path (the plane writes then renames)
    return {
        "path_config_source": {"path": path, "watched_directory": {"path": directory}},
        "resource_api_version": "V3",
    }


@dataclass(frozen=True)
class XdsFiles:
    """The live plane's files in one directory: the bootstrap (read once) and lds/rds/cds (watched)."""

    directory: str

    def path(self, name: str) -> str:
        return f"{self.directory}/{name}"

    def bootstrap(self, admin_port: int, node_id: str) -> dict[str, Any]:
        return {
            "node": {"id": node_id, "cluster": "switchover"},
            "admin": {"address": {"socket_address": {"address": "127.0.0.1", "port_value": admin_port}}},
            "dynamic_resources": {
                "lds_config": _source(self.path("lds.yaml"), self.directory),
                "cds_config": _source(self.path("cds.yaml"), self.directory),
            },
        }

    def resources(
        self, migration: Migration, routing: Routing, control_port: int, log_fields: dict[str, str], seed: bytes = b""
    ) -> dict[str, dict[str, Any]]:
        """lds.yaml, rds.yaml, cds.yaml as DiscoveryResponse documents; only rds.yaml changes with the routing.
        lds.yaml holds the deployment's seed (the Lua filter's key): the plane writes it readable by its owner."""
        rds = {
            "rds": {"route_config_name": "switchover", "config_source": _source(self.path("rds.yaml"), self.directory)}
        }
        tries = self.path(TRIES_LOG)
        lst = listener(migration, rds, access_log=stdout_access_log(log_fields), seed=seed, tries=tries)
        rc = route_config(migration, routing, control=True)
        return {
            "lds.yaml": {"resources": [{"@type": LISTENER, **lst}]},
            "rds.yaml": {"resources": [{"@type": ROUTES, **rc}]},
            "cds.yaml": {"resources": [{"@type": CLUSTER, **c} for c in clusters(migration, control_port)]},
        }
