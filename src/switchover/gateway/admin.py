"""The gateway's own endpoints: /health, /ready, /metrics, and the loopback admin endpoints (token-protected)."""

from __future__ import annotations

import secrets
import time
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING

from switchover.httpfront.messages import FrontRequest, Reply, error_reply, json_reply

if TYPE_CHECKING:
    from switchover.gateway.app import Gateway

ADMIN_HEADER = "x-switchover-admin"
Endpoint = Callable[[FrontRequest], Awaitable[Reply]]


class Admin:
    """Answers the gateway's own paths; everything else is proxied."""

    def __init__(self, gateway: Gateway) -> None:
        self.g = gateway
        self.routes: dict[str, dict[str, Endpoint]] = {
            "/health": {"GET": self.health},
            "/ready": {"GET": self.ready},
            "/metrics": {"GET": self.metrics},
            "/admin/reset": {"POST": self.reset},
            "/admin/state": {"GET": self.state},
        }

    def find(self, request: FrontRequest) -> Endpoint | Reply | None:
        """The endpoint for an own path (HEAD as GET), a 405 for a wrong method, None for a proxied path."""
        own = self.routes.get(request.path)
        if own is None:
            return None
        endpoint = own.get("GET" if request.method == "HEAD" else request.method)
        if endpoint is None:
            return error_reply(405, f"{request.method} not allowed on {request.path}", "method_not_allowed")
        return endpoint

    async def health(self, request: FrontRequest) -> Reply:
        return json_reply({"alive": True})

    async def ready(self, request: FrontRequest) -> Reply:
        if self.g.draining:
            return json_reply({"ready": False, "reason": "draining"}, 503)
        return json_reply({"ready": True})

    async def metrics(self, request: FrontRequest) -> Reply:
        return Reply(200, self.g.metrics.render(), content_type="text/plain; version=0.0.4; charset=utf-8")

    def _is_admin(self, request: FrontRequest) -> bool:
        token = self.g.admin_token
        given = request.headers.get(ADMIN_HEADER) or ""
        return (
            token is not None
            and request.remote in ("127.0.0.1", "::1")
            and secrets.compare_digest(given.encode(), token.encode())
        )

    async def reset(self, request: FrontRequest) -> Reply:
        if not self._is_admin(request):
            return error_reply(
                403, "admin endpoints take loopback requests with the token in <run_dir>/admin.token", "forbidden"
            )
        was = self.g.killswitch.latched
        self.g.reset_kill_switch()
        return json_reply({"was_latched": was, "latched": False})

    async def state(self, request: FrontRequest) -> Reply:
        if not self._is_admin(request):
            return error_reply(403, "forbidden", "forbidden")
        g = self.g
        snap = g.killswitch.snapshot(time.monotonic())
        live = g.live
        gw = live.gw
        return json_reply(
            {
                "weight": gw.weight,
                "rollback": gw.rollback,
                "draining": g.draining,
                "in_flight": len(g.inflight),
                "kill_switch": {
                    "latched": snap.latched,
                    "samples": snap.samples,
                    "bad": snap.bad,
                    "ratio": snap.ratio,
                    "reason": snap.reason,
                    "counted_samples": snap.counted_samples,
                    "counted_bad": snap.counted_bad,
                    "held": snap.held,
                    "max_client_share": gw.kill_switch.max_client_share,
                },
                "clients": {
                    "mode": live.clients.mode,
                    "keys": live.clients.keys,
                    "engine_keys_sent": live.clients.adds_engine_keys,
                },
                "connections": g.connections(),
                "ledger": str(g.ledger.path),
                "ledger_rows": g.ledger.written,
            }
        )
