"""One proxied request: check it, route it (`policy.route`), relay it from old or new with fallback before the
first byte, start its shadow, and write its ledger row when the client's answer ends.

The proxy sees the gateway only through what it needs (passed in, not reached for): the deployment (live config,
tenant seed, prompt logging, task labels), the kill switch's view, the upstream pool, the ledger sink, the metrics,
the memory budget and the in-flight set (with the drain flag), the shadow and the spot-check sampler. Its row is a
typed `RequestRow`, filled in as the request goes and written once.

What a client got wrong is the client's: a path outside the allowlist, a missing key, a body the gateway cannot
read are 4xx answers with ledger outcome `bad_request` / `unauthorized`, and never count against an arm. A request
the memory budget has no room for now is a 503 with Retry-After (outcome `refused`), one that could never fit (or a
body of more JSON values than `limits.max_json_values`) a 413; neither counts against an arm. Only what
an arm did (a fallback, an error status of 500 and up, a stream broken mid-way) feeds the kill switch.
"""

from __future__ import annotations

import asyncio
import logging
import time
from typing import Any

import orjson

from switchover.gateway.headers import forward_headers, request_id
from switchover.gateway.inflight import InFlight, Ticket
from switchover.gateway.jsoncost import count_tokens, parsed_cost
from switchover.gateway.killswitch import NewArmWatch
from switchover.gateway.ledger import client_sampling
from switchover.gateway.ledger_sink import LedgerSink, Mirror
from switchover.gateway.live import Deployment, Live
from switchover.gateway.metrics import GatewayMetrics
from switchover.gateway.observe import Observer, TextObserver, asks_for_json, json_valid
from switchover.gateway.policy import Decision, RequestMeta, route, tenant_hash
from switchover.gateway.prompt import prompt_text
from switchover.gateway.relay import normalised_body, relay_stream
from switchover.gateway.review_sampler import task_type
from switchover.gateway.shadow import GENERATION_PATHS, Shadow, shadow_body
from switchover.gateway.spotcheck import SpotCheck
from switchover.gateway.upstream import Failed, Opened, open_upstream
from switchover.httpfront.budget import Hold, MemoryBudget, OverBudget
from switchover.httpfront.messages import FrontRequest, FrontStream, Reply, error_reply
from switchover.ledger_record import Arm, Outcome, RequestRow, ShadowResult
from switchover.redaction import redact
from switchover.wire.passthrough import H1Pool
from switchover.wire.target import path_allowed

RETRY_AFTER_S = "1"  # a 503 for a full memory budget: buffers drain as requests end
OVERRIDE_HEADER = "x-switchover-route"
ARM_HEADER = "X-Switchover-Arm"
log = logging.getLogger("switchover.gateway")


class ClientError(Exception):
    """Something wrong with what the client sent: answered with `status`, ledger outcome `outcome`."""

    def __init__(self, status: int, message: str, outcome: Outcome = "bad_request", reason: str = "bad_body") -> None:
        super().__init__(message)
        self.status = status
        self.outcome = outcome
        self.reason = reason


def read_body(path: str, method: str, body: bytes) -> dict[str, Any] | None:
    """The JSON object of a request, checked where the gateway reads it. Generation requests must be a JSON
    object whose fields the gateway uses have the right types; other bodies are passed on as they are."""
    if not body or method != "POST":
        return None
    generation = path in GENERATION_PATHS
    try:
        parsed = orjson.loads(body)
    except orjson.JSONDecodeError as exc:
        if generation:
            raise ClientError(400, f"the request body is not valid JSON: {exc}") from None
        return None
    if not isinstance(parsed, dict):
        if generation:
            raise ClientError(400, f"the request body must be a JSON object, got {type(parsed).__name__}")
        return None
    for name, types, what in (
        ("model", (str,), "a string"),
        ("stream", (bool,), "true or false"),
        ("stream_options", (dict,), "an object"),
        ("max_tokens", (int,), "an integer"),
        ("max_completion_tokens", (int,), "an integer"),
    ):
        value = parsed.get(name)
        if value is not None and (not isinstance(value, types) or (types == (int,) and isinstance(value, bool))):
            raise ClientError(400, f"'{name}' must be {what}, got {orjson.dumps(value)[:60].decode()}")
    return parsed


async def priced_body(request: FrontRequest, hold: Hold, max_values: int) -> dict[str, Any] | None:
    """read_body, after the parse is priced (jsoncost.py) and drawn from `hold`: a body of more than `max_values`
    JSON tokens is a 413 before any object is built; one the memory budget has no room for is a 503."""
    body = request.body
    if not body or request.method != "POST":
        return None
    tokens = await count_tokens(body, max_values)
    if tokens is None:
        raise ClientError(
            413,
            f"the request body has more than {max_values} JSON values (gateway.limits.max_json_values)",
            reason="json_too_large",
        )
    try:
        hold.add("parsed_json", parsed_cost(body, tokens))
    except OverBudget as exc:
        raise ClientError(
            exc.status, str(exc), "bad_request" if exc.whole else "refused", reason="memory_budget"
        ) from None
    return read_body(request.path, request.method, body)


def wants_usage_injected(obj: dict[str, Any]) -> bool:
    """A streamed generation whose client did not ask for usage (the gateway asks, and strips it)."""
    if not obj.get("stream"):
        return False
    opts = obj.get("stream_options")
    return not (isinstance(opts, dict) and opts.get("include_usage"))


class Proxy:
    """The request path of a Gateway, given the collaborators it uses (see the module's docstring)."""

    def __init__(
        self,
        deployment: Deployment,
        *,
        kill_switch: NewArmWatch,
        pool: H1Pool,
        sink: LedgerSink,
        metrics: GatewayMetrics,
        budget: MemoryBudget,
        inflight: InFlight,
        shadow: Shadow,
        spotcheck: SpotCheck,
    ) -> None:
        self.deployment = deployment
        self.kill_switch = kill_switch
        self.pool = pool
        self.sink = sink
        self.metrics = metrics
        self.budget = budget
        self.inflight = inflight
        self.shadow = shadow
        self.spotcheck = spotcheck

    async def handle(self, request: FrontRequest) -> Reply | FrontStream:
        """The request with its share of the memory budget, returned when its answer is out."""
        hold = self.budget.hold()
        try:
            return await self._handle(request, hold)
        finally:
            hold.release()

    async def _handle(self, request: FrontRequest, hold: Hold) -> Reply | FrontStream:
        t0 = time.perf_counter_ns()
        live = self.deployment.live
        metrics, sink = self.metrics, self.sink
        row = RequestRow(ts=time.time(), request_id=request_id(request.headers.get("x-request-id")), path=request.path)
        try:
            obj, decision = await self._admit(request, live, row, hold)
        except ClientError as exc:
            row.outcome, row.status, row.error = exc.outcome, exc.status, redact(str(exc))[:200]  # may quote the body
            metrics.count_refused(exc.reason)
            sink.write(row)
            reply = error_reply(
                exc.status, str(exc), "invalid_request_error" if exc.status != 401 else "authentication_error"
            )
            if exc.status == 401:
                reply.headers["WWW-Authenticate"] = "Bearer"
            elif exc.status == 503:
                reply.headers["Retry-After"] = RETRY_AFTER_S
            reply.headers["X-Request-Id"] = row.request_id
            return reply
        except Exception as exc:  # a bug in the gateway, not the client's doing: said so, never an arm's failure
            log.exception("unexpected error checking request %s", row.request_id)
            row.outcome, row.status, row.error = "gateway_error", 500, f"gateway: {type(exc).__name__}"
            sink.write(row)
            return error_reply(500, "internal error in the gateway", "internal_error")
        if self.inflight.draining:
            row.outcome, row.status, row.error = "refused", 503, "draining"
            metrics.count_refused("draining")
            sink.write(row)
            refused = error_reply(503, "the gateway is shutting down; retry", "draining")
            refused.headers["Connection"] = "close"
            return refused
        metrics.child(metrics.routed, decision.arm, decision.reason).inc()
        shadowed = self._maybe_shadow(live, decision, request, obj, row)
        if live.gw.review.pairs_per_day and self._review(live, request, obj, row, hold):
            row.reviewed = True
        ticket = self.inflight.enter()
        obs = None
        try:
            resp, obs = await self._serve(request, live, decision, obj, row, ticket, hold)
            return resp
        except OverBudget as exc:  # an answer the budget had no room for: the gateway's state, not an arm's fault
            row.outcome, row.status, row.error = "refused", 503, f"memory_budget ({exc.kind})"
            metrics.count_refused("memory_budget")
            reply = error_reply(503, str(exc), "overloaded")
            reply.headers["Retry-After"] = RETRY_AFTER_S
            return reply
        except asyncio.CancelledError:
            if not ticket.cut:
                row.outcome, row.status, row.error = "client_disconnected", 499, "client went away"
                raise
            task = asyncio.current_task()
            if task is not None:
                task.uncancel()
            row.outcome, row.status, row.error = "drain_cutoff", 503, "drain_cutoff"
            return error_reply(
                503, "the gateway is shutting down; this request was cut at its drain limit", "gateway_shutdown"
            )
        except ConnectionResetError:
            row.outcome, row.status, row.error = "client_disconnected", 499, "client went away"
            raise
        except Exception as exc:
            log.exception("unexpected error on request %s", row.request_id)
            row.outcome, row.status, row.error = "gateway_error", 500, f"gateway: {type(exc).__name__}"
            return error_reply(500, "internal error in the gateway", "internal_error")
        finally:
            self.inflight.leave(ticket)
            self._observe(row, obs, t0, decision)
            sink.write(row)
            if shadowed is not None:
                sink.shadow_later(shadowed, row)

    async def _admit(
        self, request: FrontRequest, live: Live, row: RequestRow, hold: Hold
    ) -> tuple[dict[str, Any] | None, Decision]:
        """Check the request (path, client key, body) and route it; ClientError for what the client got wrong."""
        gw = live.gw
        if not path_allowed(request.path, live.allowed):
            raise ClientError(
                404,
                f"{request.path[:100]} is not served by this gateway (gateway.allowed_paths)",
                reason="path_not_allowed",
            )
        verdict = live.clients.check(request.headers.get)
        if not verdict.allowed:
            raise ClientError(401, verdict.reason, "unauthorized", "unauthorized")
        obj = await priced_body(request, hold, gw.limits.max_json_values)
        asked = obj.get("model") if obj is not None else None
        dep = self.deployment
        row.stream = bool(obj and obj.get("stream"))
        row.model = asked
        if obj is not None and request.path in GENERATION_PATHS:  # what it set of the sampling fields (issue 28)
            row.client = client_sampling(obj, dep.tenant_seed)
        tenant_key = live.clients.tenant_key(request.headers.get, verdict, gw.tenant_header)
        tenant = tenant_hash(tenant_key, dep.tenant_seed)
        est = live.estimator.estimate(obj) if live.estimator is not None and obj else None
        override = request.headers.get(OVERRIDE_HEADER)
        meta = RequestMeta(request.path, tenant, est, override, live.clients.counted_as(verdict))
        decision = route(meta, live.route_state(self.kill_switch.latched()))
        row.tenant, row.bucket = tenant, decision.bucket
        row.routed = row.arm = decision.arm
        row.route_reason, row.prompt_tokens_est, row.outcome = decision.reason, est, "error"
        labelled = task_type(gw.task_types, request.path, asked, request.headers.get)
        row.task_type = dep.task_labels(gw.task_types, labelled)
        if dep.log_prompts and obj:  # secrets masked before the ledger; a long prompt off the event loop
            text = prompt_text(obj)[0]
            row.prompt = redact(text) if len(text) <= 4096 else await asyncio.to_thread(redact, text)
        return obj, decision

    def _body_for(self, live: Live, arm: str, body: bytes, obj: dict[str, Any] | None) -> bytes:
        """The request as this arm gets it: its model name, and usage asked for on streams (to count tokens
        from the server's usage, not from chunks; the extra chunk is not passed to the client)."""
        if obj is None:
            return body
        model = live.models[arm]
        rename = bool(model and obj.get("model") != model)
        inject = wants_usage_injected(obj)
        if not rename and not inject:
            return body
        out = dict(obj)
        if rename:
            out["model"] = model
        if inject:
            out["stream_options"] = {**(obj.get("stream_options") or {}), "include_usage": True}
        return orjson.dumps(out)

    async def _open(
        self,
        live: Live,
        arm: str,
        request: FrontRequest,
        obj: dict[str, Any] | None,
        first_timeout_s: float,
        fail_statuses: frozenset[int],
        hold: Hold | None = None,
    ) -> Opened:
        t = live.gw.timeouts
        up = live.upstreams[arm]
        headers = forward_headers(
            request.headers.items,
            live.clients.credentials,
            keep_credentials=not live.clients.adds_engine_keys,
            api_key=live.engine_key(arm),
            peer=request.remote,
        )
        body = request.body
        out = self._body_for(live, arm, body, obj) if body else None
        if hold is not None and out is not None and out is not body:
            hold.add("request_body", len(out))  # the arm's copy (model renamed, usage asked for)
        return await open_upstream(
            self.pool,
            up.origin,
            up.target(request.upstream_target),
            method=request.method,
            headers=headers,
            body=out,
            first_timeout_s=first_timeout_s,
            connect_timeout_s=t.connect_ms / 1000,
            idle_timeout_s=t.idle_ms / 1000,
            fail_statuses=fail_statuses,
            observer=TextObserver if asks_for_json(obj) else Observer,
            hold=hold,
        )

    async def _serve(
        self,
        request: FrontRequest,
        live: Live,
        decision: Decision,
        obj: dict[str, Any] | None,
        row: RequestRow,
        ticket: Ticket,
        hold: Hold,
    ) -> tuple[Reply | FrontStream, Any]:
        gw = live.gw
        metrics = self.metrics
        arm: Arm = decision.arm
        opened: Opened | None = None
        if arm == "new":
            try:
                opened = await self._open(
                    live, "new", request, obj, gw.fallback.on_timeout_ms / 1000, live.fail_statuses, hold
                )
                if opened.obs.malformed or (opened.sse and opened.obs.error):
                    opened.close()
                    raise Failed("malformed" if opened.obs.malformed else "stream_error", opened.status)
            except Failed as f:
                opened = None
                row.fallback_reason = f.reason
                metrics.child(metrics.fallbacks, f.reason).inc()
                arm = "old"
        row.arm = arm
        if opened is None:
            try:
                opened = await self._open(
                    live, "old", request, obj, gw.timeouts.first_byte_ms / 1000, frozenset(), hold
                )
            except Failed as f:
                status = 504 if f.reason == "timeout" else 502
                row.outcome, row.status, row.error = "error", status, f"old: {f}"
                return error_reply(status, f"upstream failed: {f.reason}", "upstream_unavailable"), None
        ctype = opened.resp.headers.get("content-type", "application/octet-stream")
        headers = {"Content-Type": ctype, "X-Request-Id": row.request_id}
        if gw.expose_arm_header:
            headers[ARM_HEADER] = arm
        asked = row.model
        if opened.sse:
            headers["Cache-Control"] = "no-cache"
            ticket.streaming = opened
            try:
                strip = obj is not None and wants_usage_injected(obj)
                result = await relay_stream(request, opened, asked, headers, strip_usage=strip, cutoff=ticket)
            except BaseException:
                opened.close()
                raise
            finally:
                ticket.streaming = None
            row.outcome, row.status, row.error = result.outcome, result.status, result.error
            if result.outcome == "ok" and row.fallback_reason:
                row.outcome = "fallback_ok"
            assert result.response is not None
            return result.response, opened.obs
        raw = normalised_body(opened, asked)
        opened.resp.release()
        ok = opened.status < 400
        row.outcome = ("fallback_ok" if row.fallback_reason else "ok") if ok else "error"
        row.status, row.error = opened.status, None if ok else f"status_{opened.status}"
        return Reply(opened.status, raw, headers, content_type=None), opened.obs

    def _maybe_shadow(
        self, live: Live, decision: Decision, request: FrontRequest, obj: dict[str, Any] | None, row: RequestRow
    ) -> Mirror | None:
        """Start the mirror of a sampled generation request; credentials never travel with it (new's own key
        does, in keys / open mode)."""
        cfg = live.gw.shadow
        shadow = self.shadow
        if obj is None or request.method != "POST" or request.path not in GENERATION_PATHS or not shadow.sampled(cfg):
            return None
        asked = row.model
        if cfg.upstream == "new":
            if decision.arm == "new":
                return None  # the primary already goes there
            name, model, key = "new", live.models["new"] or asked, live.engine_key("new")
            url = live.urls["new"] + request.upstream_target
        else:
            name, model, key = cfg.upstream, cfg.model or asked, None
            url = cfg.upstream + request.upstream_target
        headers = dict(
            forward_headers(request.headers.items, live.clients.credentials, keep_credentials=False, api_key=key)
        )
        headers["Content-Type"] = "application/json"
        body = shadow_body(obj, model, cfg.max_tokens_clamp)
        budget, metrics = self.budget, self.metrics
        row.shadowed = True
        if not budget.take("shadow", len(body)):  # the copy outlives the request: drawn until the mirror ends
            metrics.child(metrics.shadow, "dropped").inc()
            return ShadowResult(upstream=name, dropped=True, error="memory_budget")
        result = shadow.start(cfg, url, name, body, headers, live.gw.timeouts.connect_ms / 1000)
        n = len(body)
        if isinstance(result, ShadowResult):
            budget.give("shadow", n)
            metrics.child(metrics.shadow, "dropped").inc()
        else:
            result.add_done_callback(lambda _fut: budget.give("shadow", n))
        return result

    def _review(
        self, live: Live, request: FrontRequest, obj: dict[str, Any] | None, row: RequestRow, hold: Hold
    ) -> bool:
        """Offer the request to the spot-check sampler, with what its pair holds drawn from the budget until the pair
        ends (two copies of the body and the parsed request they are rendered from); no room: no pair."""
        spot, budget = self.spotcheck, self.budget
        n = 2 * len(request.body) + hold.drawn.get("parsed_json", 0)
        if not budget.take("review", n):
            return False
        before = set(spot.tasks)
        started = spot.tasks - before if spot.maybe(live, request, obj, row) else set()
        if not started:
            budget.give("review", n)
            return False
        next(iter(started)).add_done_callback(lambda _t: budget.give("review", n))
        return True

    def _observe(self, row: RequestRow, obs: Observer | None, t0: int, decision: Decision) -> None:
        """Timings and token counts by the bench's formulas (Observer.timings, measure/timing.py), the per-arm
        metrics, and the kill switch's view of the new arm."""
        metrics = self.metrics
        done_s = (time.perf_counter_ns() - t0) / 1e9  # arrival to the answer's last byte (the e2e histogram)
        arm = row.arm
        if arm is None:
            return
        if obs is not None:
            t = obs.timings(t0, row.stream)
            row.finish_reason, row.prompt_tokens, row.e2e_ms = t.finish_reason, t.prompt_tokens, t.e2e_ms
            row.completion_tokens, row.tokens_source = t.completion_tokens, t.tokens_source
            row.ttft_ms, row.tpot_ms = t.ttft_ms, t.tpot_ms
            if t.ttft_ms is not None:
                metrics.child(metrics.ttft, arm).observe(t.ttft_ms / 1000)
            if t.tpot_ms is not None:
                metrics.child(metrics.tpot, arm).observe(t.tpot_ms / 1000)
            if obs.usage is not None and isinstance(obs.usage.cached_tokens, int):
                row.cached_tokens = obs.usage.cached_tokens
            if isinstance(obs, TextObserver) and row.outcome in ("ok", "fallback_ok"):
                row.json_valid = json_valid(obs.text)
        outcome = row.outcome
        if outcome == "failed_mid_stream" and row.finish_reason is None:
            row.finish_reason = "error"
        metrics.child(metrics.e2e, arm).observe(done_s)
        metrics.child(metrics.requests, arm, outcome).inc()
        if decision.arm == "new" and outcome not in ("client_disconnected", "drain_cutoff", "gateway_error", "refused"):
            failed_on_new = arm == "new" and (
                outcome == "failed_mid_stream" or (outcome == "error" and row.status >= 500)
            )
            self.kill_switch.record(bool(row.fallback_reason) or failed_on_new, decision.client)
