"""The gateway server (aiohttp): route each request with `policy.route`, relay it from old or new, fall back
before the first byte, mirror a sample to the shadow upstream, write one ledger row, export metrics."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import secrets
import time
from pathlib import Path
from typing import Any

import orjson
from aiohttp import web

from switchover.config import Migration, load_migration
from switchover.gateway.front import error_response
from switchover.gateway.killswitch import KillSwitch
from switchover.gateway.ledger import Ledger
from switchover.gateway.ledger_record import ShadowResult
from switchover.gateway.live import Live, build_live
from switchover.gateway.metrics import GatewayMetrics
from switchover.gateway.policy import Decision, RequestMeta, route, tenant_hash, threshold
from switchover.gateway.prompt import prompt_text
from switchover.gateway.relay import normalised_body, relay_stream
from switchover.gateway.shadow import GENERATION_PATHS, Shadow, shadow_body
from switchover.gateway.upstream import Failed, Opened, new_session, open_upstream, upstream_headers
from switchover.wire.passthrough import H1Pool

OVERRIDE_HEADER = "X-Switchover-Route"
ARM_HEADER = "X-Switchover-Arm"
ADMIN_HEADER = "X-Switchover-Admin"
LEDGER_FLUSH_S = 0.1  # ledger rows reach the file within this (one write syscall per batch, not per row)
log = logging.getLogger("switchover.gateway")


def _wants_usage_injected(obj: dict[str, Any]) -> bool:
    """A streamed generation whose client did not ask for usage (the gateway asks, and strips it)."""
    if not obj.get("stream"):
        return False
    opts = obj.get("stream_options")
    return not (isinstance(opts, dict) and opts.get("include_usage"))


def _bearer(value: str | None) -> str | None:
    if value and value[:7].lower() == "bearer ":
        return value[7:].strip() or None
    return value or None


MAX_BODY = 64 << 20  # largest request body accepted (413 above)


def _error(status: int, message: str, kind: str = "upstream_unavailable") -> web.Response:
    return error_response(status, message, kind)


class Gateway:
    """State shared by all requests: live config, kill switch, ledger, metrics, upstream session."""

    def __init__(self, migration: Migration, config_path: Path | None = None, *, log_prompts: bool = False,
                 run_dir: Path | None = None) -> None:
        self.config_path = config_path
        self.live = build_live(migration)
        gw = self.live.gw
        self.run_dir = run_dir or gw.resolved_run_dir(config_path)
        self.run_dir.mkdir(parents=True, exist_ok=True)
        self.log_prompts = log_prompts
        self.ledger = Ledger(self.run_dir, int(gw.ledger_rotate_mb * (1 << 20)), flush_interval_s=LEDGER_FLUSH_S)
        self.metrics = GatewayMetrics()
        self.metrics.preset(fallback_statuses=self.live.fail_statuses)
        ks = gw.kill_switch
        self.killswitch = KillSwitch(ks.window, ks.min_samples, ks.max_fallback_ratio, ks.enabled)
        self._restore_latch()
        self.session: Any = None  # aiohttp, for the shadow
        self.pool = H1Pool()  # the old / new arms
        self.shadow: Shadow | None = None
        self.in_flight = 0
        self.metrics.in_flight.set_function(lambda: self.in_flight)  # read at scrape time, not locked per request
        self.draining = False
        self._idle = asyncio.Event()
        self.admin_token = secrets.token_urlsafe(24)
        token_path = self.run_dir / "admin.token"
        with contextlib.suppress(FileNotFoundError):
            token_path.unlink()
        fd = os.open(token_path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        with os.fdopen(fd, "w") as fh:
            fh.write(self.admin_token)
        self._sig = self._file_sig()
        self._watch_task: asyncio.Task[None] | None = None
        self._flush_task: asyncio.Task[None] | None = None
        self._publish_config()

    # ---- config and reload -------------------------------------------------------------------------
    def _file_sig(self) -> tuple[int, int, int] | None:
        if self.config_path is None:
            return None
        try:
            st = self.config_path.stat()
        except OSError:
            return None
        return (st.st_mtime_ns, st.st_ino, st.st_size)

    def _publish_config(self) -> None:
        g = self.live.gw
        self.metrics.weight.set(g.weight)
        killed = self.killswitch.latched
        self.metrics.effective_weight.set(0 if (g.rollback or killed) else threshold(g.weight) / 100)
        self.metrics.kill_switch.set(1 if killed else 0)

    def reload(self) -> bool:
        """Re-read the config file; an invalid one is rejected (logged) and the running config kept."""
        if self.config_path is None:
            return False
        try:
            live = build_live(load_migration(self.config_path))
        except Exception as exc:  # any problem keeps the running config
            msg = getattr(exc, "message", None) or f"{type(exc).__name__}: {exc}"
            log.error("config reload rejected, keeping the running config: %s", msg)
            self.metrics.child(self.metrics.reloads, "rejected").inc()
            return False
        old, self.live = self.live.gw, live
        g = live.gw
        ks = g.kill_switch
        self.killswitch.configure(ks.window, ks.min_samples, ks.max_fallback_ratio, ks.enabled)
        if (old.listen, old.run_dir) != (g.listen, g.run_dir):
            log.warning("listen / run_dir changes take effect only after a restart")
        log.info("config reloaded: weight %g -> %g, rollback %s -> %s, shadow %g%% -> %g%%",
                 old.weight, g.weight, old.rollback, g.rollback, old.shadow.percent, g.shadow.percent)
        self.metrics.child(self.metrics.reloads, "ok").inc()
        self._publish_config()
        return True

    async def _flush_ledger(self) -> None:
        while True:
            await asyncio.sleep(LEDGER_FLUSH_S)
            self.ledger.flush()

    async def _watch(self) -> None:
        while True:
            await asyncio.sleep(self.live.gw.reload_poll_s)
            sig = self._file_sig()
            if sig != self._sig:
                self._sig = sig
                if sig is None:
                    log.error("config file %s is missing; keeping the running config", self.config_path)
                    self.metrics.child(self.metrics.reloads, "rejected").inc()
                else:
                    self.reload()

    # ---- kill switch -------------------------------------------------------------------------------
    def _latch_path(self) -> Path:
        return self.run_dir / "killswitch.json"

    def _restore_latch(self) -> None:
        with contextlib.suppress(OSError, ValueError):
            state = orjson.loads(self._latch_path().read_bytes())
            if state.get("latched"):
                self.killswitch.restore(True, state.get("reason"))
                log.warning("kill switch is latched from before the restart: %s", state.get("reason"))

    def _save_latch(self) -> None:
        data = {"latched": self.killswitch.latched, "reason": self.killswitch.reason, "ts": time.time()}
        tmp = self._latch_path().with_suffix(".tmp")
        tmp.write_bytes(orjson.dumps(data))
        tmp.replace(self._latch_path())

    def reset_kill_switch(self) -> None:
        self.killswitch.reset()
        self._save_latch()
        self._publish_config()
        log.warning("kill switch reset: new arm back at weight %g", self.live.gw.weight)

    def _count_new(self, bad: bool) -> None:
        now = time.monotonic()
        if bad:
            self.metrics.new_arm_bad.inc()
        if self.killswitch.record(now, bad):
            self.metrics.kill_switch_trips.inc()
            self._save_latch()
            self._publish_config()
            log.error("KILL SWITCH tripped, weight latched to 0 until `switchover gateway reset`: %s",
                      self.killswitch.reason)
        snap = self.killswitch.snapshot(now)
        self.metrics.kill_switch_ratio.set(float("nan") if snap.ratio is None else snap.ratio)

    # ---- lifecycle ---------------------------------------------------------------------------------
    def _own_routes(self) -> dict[str, dict[str, Any]]:
        """The gateway's own endpoints, path -> method -> handler: the one table both servers route by."""
        routes: dict[str, dict[str, Any]] | None = self.__dict__.get("_routes")
        if routes is None:
            routes = self.__dict__["_routes"] = {
                "/health": {"GET": self._health}, "/ready": {"GET": self._ready}, "/metrics": {"GET": self._metrics},
                "/admin/reset": {"POST": self._admin_reset}, "/admin/state": {"GET": self._admin_state}}
        return routes

    def app(self) -> web.Application:
        """The gateway as an aiohttp application (`front: aiohttp`)."""
        app = web.Application(client_max_size=MAX_BODY)
        for path, methods in self._own_routes().items():
            for method, handler in methods.items():
                if method == "GET":
                    app.router.add_get(path, handler)  # answers HEAD too, as the raw front does
                else:
                    app.router.add_route(method, path, handler)
        for path in GENERATION_PATHS:  # exact paths resolve without the catch-all's regex (same handler)
            app.router.add_route("*", path, self.proxy)
        app.router.add_route("*", "/{tail:.*}", self.proxy)
        app.on_startup.append(self._startup)
        app.on_cleanup.append(self._cleanup)
        return app

    async def dispatch(self, request: Any) -> web.StreamResponse:
        """The raw front's router: the gateway's own endpoints by exact path and method (HEAD as GET), everything
        else proxied."""
        own = self._own_routes().get(request.path)
        if own is None:
            return await self.proxy(request)
        handler = own.get("GET" if request.method == "HEAD" else request.method)
        if handler is None:
            return _error(405, f"{request.method} not allowed on {request.path}", "method_not_allowed")
        return await handler(request)

    async def _startup(self, app: web.Application | None) -> None:
        self.session = new_session()
        self.shadow = Shadow(self.session)
        self._flush_task = asyncio.ensure_future(self._flush_ledger())
        if self.config_path is not None:
            self._watch_task = asyncio.ensure_future(self._watch())

    async def _cleanup(self, app: web.Application | None) -> None:
        for task in (self._watch_task, self._flush_task):
            if task is not None:
                task.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await task
        if self.shadow is not None:
            await self.shadow.close()
        self.pool.close()
        if self.session is not None:
            await self.session.close()
        self.ledger.close()

    async def drain(self, seconds: float | None = None) -> int:
        """Readiness goes 503, new requests are refused, in-flight ones get up to `seconds`; returns how many
        were still running when time ran out."""
        self.draining = True
        self.metrics.draining.set(1)
        limit = self.live.gw.drain_seconds if seconds is None else seconds
        log.info("draining: %d in flight, up to %g s", self.in_flight, limit)
        if self.in_flight:
            self._idle.clear()
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(limit):
                    while self.in_flight:
                        await self._idle.wait()
                        self._idle.clear()
        return self.in_flight

    # ---- own endpoints -----------------------------------------------------------------------------
    async def _health(self, request: web.Request) -> web.Response:
        return web.json_response({"alive": True})

    async def _ready(self, request: web.Request) -> web.Response:
        if self.draining:
            return web.json_response({"ready": False, "reason": "draining"}, status=503)
        return web.json_response({"ready": True})

    async def _metrics(self, request: web.Request) -> web.Response:
        return web.Response(body=self.metrics.render(), content_type="text/plain", charset="utf-8")

    def _is_admin(self, request: web.Request) -> bool:
        loopback = request.remote in ("127.0.0.1", "::1")
        token = request.headers.get(ADMIN_HEADER, "")
        return loopback and secrets.compare_digest(token.encode(), self.admin_token.encode())

    async def _admin_reset(self, request: web.Request) -> web.Response:
        if not self._is_admin(request):
            return _error(403, "admin endpoints take loopback requests with the token in <run_dir>/admin.token",
                          "forbidden")
        was = self.killswitch.latched
        self.reset_kill_switch()
        return web.json_response({"was_latched": was, "latched": False})

    async def _admin_state(self, request: web.Request) -> web.Response:
        if not self._is_admin(request):
            return _error(403, "forbidden", "forbidden")
        snap = self.killswitch.snapshot(time.monotonic())
        g = self.live.gw
        return web.json_response({
            "weight": g.weight, "rollback": g.rollback, "draining": self.draining, "in_flight": self.in_flight,
            "kill_switch": {"latched": snap.latched, "samples": snap.samples, "bad": snap.bad,
                            "ratio": snap.ratio, "reason": snap.reason},
            "ledger": str(self.ledger.path), "ledger_rows": self.ledger.written})

    # ---- the proxied request -----------------------------------------------------------------------
    async def proxy(self, request: web.Request) -> web.StreamResponse:
        t0 = time.perf_counter_ns()
        live = self.live
        gw = live.gw
        body = await request.read()
        obj: dict[str, Any] | None = None
        if body and request.method == "POST":
            with contextlib.suppress(orjson.JSONDecodeError):
                parsed = orjson.loads(body)
                obj = parsed if isinstance(parsed, dict) else None
        asked = obj.get("model") if obj and isinstance(obj.get("model"), str) else None
        stream = bool(obj and obj.get("stream"))
        tenant = tenant_hash(request.headers.get(gw.tenant_header) or _bearer(request.headers.get("Authorization")))
        est = live.estimator.estimate(obj) if live.estimator is not None and obj else None
        meta = RequestMeta(request.path, tenant, est, request.headers.get(OVERRIDE_HEADER))
        decision = route(meta, live.route_state(self.killswitch.latched))
        row: dict[str, Any] = {
            "ts": time.time(), "request_id": (request.headers.get("X-Request-Id") or os.urandom(16).hex())[:128],
            "tenant": tenant, "bucket": decision.bucket, "path": request.path, "routed": decision.arm,
            "route_reason": decision.reason, "arm": decision.arm, "stream": stream, "model": asked,
            "prompt_tokens_est": est, "outcome": "error", "status": 0}
        if self.log_prompts and obj:
            row["prompt"] = prompt_text(obj)[0]
        if self.draining:
            row.update(route_reason="draining", arm="old", routed="old", status=503, error="draining")
            self._write(row, None)
            refused = _error(503, "the gateway is shutting down; retry", "draining")
            refused.headers["Connection"] = "close"
            return refused
        self.metrics.child(self.metrics.routed, decision.arm, decision.reason).inc()
        shadow = self._maybe_shadow(live, decision, request, obj, asked)
        self.in_flight += 1
        obs = None
        try:
            resp, obs = await self._serve(request, live, decision, body, obj, asked, stream, row)
            return resp
        except asyncio.CancelledError:
            row.update(outcome="client_disconnected", status=499, error="client went away")
            raise
        except ConnectionResetError:
            row.update(outcome="client_disconnected", status=499, error="client went away")
            raise
        finally:
            self.in_flight -= 1
            self._observe(row, obs, t0, decision)
            self._write(row, shadow)
            if not self.in_flight:
                self._idle.set()

    def _body_for(self, live: Live, arm: str, body: bytes, obj: dict[str, Any] | None) -> bytes:
        """The request as this arm gets it: its model name, and usage asked for on streams (to count tokens
        from the server's usage, not from chunks; the extra chunk is not passed to the client)."""
        if obj is None:
            return body
        model = live.models[arm]
        rename = bool(model and obj.get("model") != model)
        if not rename and not _wants_usage_injected(obj):
            return body
        out = dict(obj)
        if rename:
            out["model"] = model
        if _wants_usage_injected(obj):
            out["stream_options"] = {**(obj.get("stream_options") or {}), "include_usage": True}
        return orjson.dumps(out)

    async def _open(self, live: Live, arm: str, request: web.Request, body: bytes, obj: dict[str, Any] | None,
                    first_timeout_s: float, fail_statuses: frozenset[int]) -> Opened:
        t = live.gw.timeouts
        return await open_upstream(
            self.pool, live.urls[arm] + request.path_qs, method=request.method,
            headers=upstream_headers(request.headers, live.keys[arm]),
            body=self._body_for(live, arm, body, obj) if body else None, first_timeout_s=first_timeout_s,
            connect_timeout_s=t.connect_ms / 1000, idle_timeout_s=t.idle_ms / 1000, fail_statuses=fail_statuses)

    async def _serve(self, request: web.Request, live: Live, decision: Decision, body: bytes,
                     obj: dict[str, Any] | None, asked: str | None, stream: bool,
                     row: dict[str, Any]) -> tuple[web.StreamResponse, Any]:
        gw = live.gw
        arm = decision.arm
        opened: Opened | None = None
        if arm == "new":
            try:
                opened = await self._open(live, "new", request, body, obj, gw.fallback.on_timeout_ms / 1000,
                                          live.fail_statuses)
                if opened.obs.malformed or (opened.sse and opened.obs.error):
                    opened.close()
                    raise Failed("malformed" if opened.obs.malformed else "stream_error", opened.status)
            except Failed as f:
                opened = None
                row["fallback_reason"] = f.reason
                self.metrics.child(self.metrics.fallbacks, f.reason).inc()
                arm = "old"
        row["arm"] = arm
        if opened is None:
            try:
                opened = await self._open(live, "old", request, body, obj, gw.timeouts.first_byte_ms / 1000,
                                          frozenset())
            except Failed as f:
                status = 504 if f.reason == "timeout" else 502
                row.update(outcome="error", status=status, error=f"old: {f}")
                return _error(status, f"upstream failed: {f.reason}"), None
        headers = {"Content-Type": opened.resp.headers.get("Content-Type", "application/octet-stream"),
                   "X-Request-Id": row["request_id"]}
        if gw.expose_arm_header:
            headers[ARM_HEADER] = arm
        if opened.sse:
            headers["Cache-Control"] = "no-cache"
            try:
                strip = obj is not None and _wants_usage_injected(obj)
                result = await relay_stream(request, opened, asked, headers, strip_usage=strip)
            except BaseException:
                opened.close()
                raise
            row.update(outcome=result.outcome, status=result.status, error=result.error)
            if result.outcome == "ok" and row.get("fallback_reason"):
                row["outcome"] = "fallback_ok"
            assert result.response is not None
            return result.response, opened.obs
        raw = normalised_body(opened, asked)
        opened.resp.release()
        ok = opened.status < 400
        outcome = ("fallback_ok" if row.get("fallback_reason") else "ok") if ok else "error"
        row.update(outcome=outcome, status=opened.status, error=None if ok else f"status_{opened.status}")
        return web.Response(status=opened.status, body=raw, headers=headers), opened.obs

    def _maybe_shadow(self, live: Live, decision: Decision, request: web.Request, obj: dict[str, Any] | None,
                      asked: str | None) -> Any:
        cfg = live.gw.shadow
        if (self.shadow is None or obj is None or request.method != "POST"
                or not request.path.startswith(GENERATION_PATHS) or not self.shadow.sampled(cfg)):
            return None
        if cfg.upstream == "new":
            if decision.arm == "new":
                return None  # the primary already goes there
            url, name, model, key, fwd = live.urls["new"], "new", live.models["new"] or asked, live.keys["new"], True
        else:
            url, name, model, key, fwd = cfg.upstream, cfg.upstream, cfg.model or asked, None, False
        headers = dict(upstream_headers(request.headers, key, forward_auth=fwd))
        headers["Content-Type"] = "application/json"
        result = self.shadow.start(cfg, url + request.path, name, shadow_body(obj, model, cfg.max_tokens_clamp),
                                   headers, live.gw.timeouts.connect_ms / 1000)
        if isinstance(result, ShadowResult):
            self.metrics.child(self.metrics.shadow, "dropped").inc()
        return result

    def _observe(self, row: dict[str, Any], obs: Any, t0: int, decision: Decision) -> None:
        end = time.perf_counter_ns()
        row["e2e_ms"] = (end - t0) / 1e6
        arm = row["arm"]
        if obs is not None:
            row["finish_reason"] = obs.finish_reason
            row["prompt_tokens"] = obs.prompt_tokens
            if obs.completion_tokens is not None:
                row["completion_tokens"], row["tokens_source"] = obs.completion_tokens, "usage"
            elif row["stream"] and obs.content_events:
                row["completion_tokens"], row["tokens_source"] = obs.content_events, "chunks"
            if row["stream"] and obs.first_content_ns is not None:
                ttft = (obs.first_content_ns - t0) / 1e6
                row["ttft_ms"] = ttft
                self.metrics.child(self.metrics.ttft, arm).observe(ttft / 1000)
                n = row.get("completion_tokens")  # TPOT only from the server's N, never from a chunk count
                if row.get("tokens_source") == "usage" and n and n > 1 and obs.last_ns:
                    tpot = ((obs.last_ns - t0) / 1e6 - ttft) / (n - 1)
                    row["tpot_ms"] = tpot
                    self.metrics.child(self.metrics.tpot, arm).observe(tpot / 1000)
        if row["outcome"] == "failed_mid_stream" and row.get("finish_reason") is None:
            row["finish_reason"] = "error"
        self.metrics.child(self.metrics.e2e, arm).observe(row["e2e_ms"] / 1000)
        self.metrics.child(self.metrics.requests, arm, row["outcome"]).inc()
        if decision.arm == "new" and row["outcome"] != "client_disconnected":
            failed_on_new = arm == "new" and (row["outcome"] == "failed_mid_stream"
                                              or (row["outcome"] == "error" and not 400 <= row["status"] < 500))
            self._count_new(bool(row.get("fallback_reason")) or failed_on_new)

    def _write(self, row: dict[str, Any], shadow: Any) -> None:
        if isinstance(shadow, asyncio.Future) and not shadow.done():
            shadow.add_done_callback(lambda t: self._write(row, t))
            return
        if isinstance(shadow, asyncio.Future):
            result = None if shadow.cancelled() else shadow.result()
            if result is None:
                result = ShadowResult(upstream="new", dropped=False, error="cancelled")
            self.metrics.child(self.metrics.shadow, "error" if result.error else "ok").inc()
            shadow = result
        if shadow is not None:
            row["shadow"] = shadow.model_dump(exclude_none=True)
        try:
            # the row holds exactly LedgerRecord's fields (tests read every outcome back through the model);
            # skipping per-row validation keeps it off the hot path
            self.ledger.write_row(row)
        except Exception:
            self.metrics.ledger_errors.inc()
            log.exception("ledger row %s could not be written", row.get("request_id"))
