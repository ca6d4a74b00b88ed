"""`export envoy`: the static form of the configuration the Envoy data plane runs (gateway/envoy/render.py):
tenant buckets computed by a Lua filter with the built-in gateway's hash (unkeyed here: an export holds no
deployment seed), the routes matching the bucket, an aggregate cluster [new, old] so a failed try on new is retried
on old, request mirroring to new, bypass paths pinned to old, 404 outside the allowed paths. Tested with Envoy 1.40.
"""

from __future__ import annotations

import subprocess
import tempfile
from pathlib import Path

from switchover.config import Migration
from switchover.config.gateway import GatewayConfig
from switchover.errors import BadInput
from switchover.export.result import ExportResult, Limitation
from switchover.gateway.envoy.binary import find_envoy
from switchover.gateway.envoy.render import Routing, static_bootstrap

__all__ = ["LIMITS", "envoy_config", "find_envoy", "validate_with_envoy"]

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
        instead="run `switchover gateway` with gateway.data_plane: envoy (it latches the kill switch from Envoy's "
        "access log and rewrites the routes), or use switchover rollout watch",
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
        instead="scrape the engines' own TTFT histograms (see `switchover export grafana`); with "
        "gateway.data_plane: envoy switchover writes ledger rows from Envoy's access log, with TTFT, usage tokens "
        "and finish_reason read by the same Lua filter",
    ),
]


def envoy_config(
    migration: Migration, *, weight: float | None = None, listen_port: int | None = None, admin_port: int = 9901
) -> ExportResult:
    """A static bootstrap from the one renderer the live Envoy data plane uses (gateway/envoy/render.py)."""
    gw = migration.gateway or GatewayConfig()
    w = gw.weight if weight is None else weight
    if not 0 <= w <= 100:
        raise BadInput(f"weight must be 0..100, got {w:g}")
    routing = Routing(weight=w, rollback=gw.rollback)
    doc = static_bootstrap(migration, routing, listen_port=listen_port, admin_port=admin_port)
    notes = [
        f"weight of new: {routing.new_share / 100:g} % of tenants (the built-in gateway's bucket of header "
        f"{gw.tenant_header!r}, else the bearer token, computed by the Lua filter with an empty seed: anyone can "
        "pick a tenant id that lands on new; `switchover gateway` with data_plane: envoy keys it with the "
        "deployment's seed); "
        "rollback: route everything to cluster old (or run `switchover gateway` with data_plane: envoy, which "
        "keeps Envoy in step with the file)",
        f"admin on 127.0.0.1:{admin_port}; shadow share at runtime: POST "
        f"/runtime_modify?switchover.shadow_percent=N (parts per million)",
    ]
    return ExportResult(target="envoy", format="yaml", documents=[doc], cannot_express=LIMITS, notes=notes)


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
