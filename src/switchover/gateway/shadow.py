"""Shadow traffic: a sampled copy of a request sent to new (or a third upstream), streamed and measured,
never returned to the client and never awaited by the primary path. Beyond `max_concurrency` mirrors in
flight a copy is dropped (and counted) instead of queued, so a slow shadow cannot slow the primary.

A mirror goes through the wire client (`EngineClient.post`), so it is folded and timed exactly as `bench` folds
and times a request (wire/fold.py, measure/timing.py); `timeout_ms` bounds it from send to the last byte. A mirror
never carries a query parameter named like a credential (`?api_key=`, `?key=`: headers.copy_target).
"""

from __future__ import annotations

import asyncio
import random
from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit

import orjson

from switchover.config.gateway import ShadowConfig
from switchover.errors import BadInput
from switchover.gateway.headers import copy_target
from switchover.gateway.observe import record_timings
from switchover.ledger_record import ShadowResult
from switchover.wire.client import EngineClient, Timeouts
from switchover.wire.records import FailureKind, RequestRecord

if TYPE_CHECKING:
    import aiohttp

GENERATION_PATHS = ("/v1/completions", "/v1/chat/completions")

_LABELS: dict[FailureKind, str] = {
    FailureKind.CONNECT: "connect",
    FailureKind.CONNECT_TIMEOUT: "timeout",
    FailureKind.FIRST_BYTE_TIMEOUT: "timeout",
    FailureKind.IDLE_TIMEOUT: "timeout",
    FailureKind.TOTAL_TIMEOUT: "timeout",
    FailureKind.STREAM_ERROR: "stream_error",
    FailureKind.PROTOCOL: "malformed",
    FailureKind.TRUNCATED: "truncated",
    FailureKind.CANCELLED: "cancelled",
}


def shadow_body(obj: dict[str, Any], model: str | None, clamp: int | None) -> bytes:
    """The mirrored request: streamed with usage (to measure it), model renamed, max_tokens clamped."""
    body = dict(obj)
    if model:
        body["model"] = model
    body["stream"] = True
    body["stream_options"] = {"include_usage": True}
    if clamp is not None:
        for key in ("max_tokens", "max_completion_tokens"):
            if isinstance(body.get(key), int):
                body[key] = min(body[key], clamp)
        if not isinstance(body.get("max_tokens"), int) and not isinstance(body.get("max_completion_tokens"), int):
            body["max_tokens"] = clamp
    return orjson.dumps(body)


def shadow_result(name: str, rec: RequestRecord) -> ShadowResult:
    """What a mirror did: the wire record's failure as a short label, its timings by the bench's formulas."""
    t = record_timings(rec)
    f = rec.failure
    if f is None:
        error = None
    elif f.kind is FailureKind.HTTP_STATUS:
        error = f"status_{rec.status}"
    elif f.kind is FailureKind.DISCONNECTED:
        error = f"disconnected ({f.message[:120]})"
    else:
        error = _LABELS.get(f.kind, f.kind.value)
    return ShadowResult(
        upstream=name,
        dropped=False,
        status=rec.status,
        ttft_ms=t.ttft_ms,
        tpot_ms=t.tpot_ms,
        e2e_ms=t.e2e_ms,
        completion_tokens=t.completion_tokens,
        finish_reason=t.finish_reason,
        error=error,
    )


class Shadow:
    """Starts mirrors and bounds how many run at once; one wire client per upstream origin and timeouts."""

    def __init__(self, session: aiohttp.ClientSession | None = None, rng: random.Random | None = None) -> None:
        # `session` (the aiohttp session mirrors used to go through) is no longer used; accepted so callers that
        # still pass one keep working
        self.rng = rng or random.Random()
        self.in_flight = 0
        self.tasks: set[asyncio.Task[ShadowResult]] = set()
        self.clients: dict[tuple[str, Timeouts], EngineClient] = {}
        self._users: dict[EngineClient, int] = {}
        self._retired: set[EngineClient] = set()  # replaced (timeouts changed): closed once their mirrors end

    def sampled(self, cfg: ShadowConfig) -> bool:
        return cfg.percent > 0 and (cfg.percent >= 100 or self.rng.random() * 100 < cfg.percent)

    def start(
        self, cfg: ShadowConfig, url: str, name: str, body: bytes, headers: dict[str, str], connect_timeout_s: float
    ) -> asyncio.Task[ShadowResult] | ShadowResult:
        """A running mirror of `body` POSTed to `url` (base + path) with exactly `headers` (plus Host and
        Content-Length), or a dropped ShadowResult when the bound is full."""
        if self.in_flight >= cfg.max_concurrency:
            return ShadowResult(upstream=name, dropped=True)
        self.in_flight += 1
        task = asyncio.ensure_future(self._run(cfg, url, name, body, headers, connect_timeout_s))
        self.tasks.add(task)
        task.add_done_callback(self._done)
        return task

    def _done(self, task: asyncio.Task[ShadowResult]) -> None:
        self.in_flight -= 1
        self.tasks.discard(task)

    async def _client(self, origin: str, timeouts: Timeouts) -> EngineClient:
        """The wire client for `origin` with these timeouts; one made for older timeouts (a reloaded config) is
        closed now if idle, else when its last mirror ends."""
        key = (origin, timeouts)
        client = self.clients.get(key)
        if client is None:
            for old in [k for k in self.clients if k[0] == origin]:
                retired = self.clients.pop(old)
                if self._users.get(retired):
                    self._retired.add(retired)
                else:
                    await retired.close()
            client = self.clients[key] = EngineClient(origin, timeouts=timeouts)
        return client

    async def _run(
        self, cfg: ShadowConfig, url: str, name: str, body: bytes, headers: dict[str, str], connect_timeout_s: float
    ) -> ShadowResult:
        total = cfg.timeout_ms / 1000
        timeouts = Timeouts(connect=min(connect_timeout_s, total), first_byte=total, idle=total, total=total)
        parts = urlsplit(url)
        target = copy_target(parts.path + (f"?{parts.query}" if parts.query else ""))  # no ?api_key= to a mirror
        client: EngineClient | None = None
        try:
            client = await self._client(f"{parts.scheme}://{parts.netloc}", timeouts)
            self._users[client] = self._users.get(client, 0) + 1
            rec = await client.post(target, body, headers, stream=True)
        except asyncio.CancelledError:
            return ShadowResult(upstream=name, dropped=False, error="cancelled")
        except BadInput:  # a URL or header the wire client cannot send
            return ShadowResult(upstream=name, dropped=False, error="connect")
        finally:
            if client is not None:
                await self._release(client)
        return shadow_result(name, rec)

    async def _release(self, client: EngineClient) -> None:
        left = self._users[client] = self._users.get(client, 1) - 1
        if left <= 0:
            self._users.pop(client, None)
            if client in self._retired:
                self._retired.discard(client)
                await client.close()

    async def close(self) -> None:
        for t in list(self.tasks):
            t.cancel()
        if self.tasks:
            await asyncio.gather(*self.tasks, return_exceptions=True)
        for client in [*self.clients.values(), *self._retired]:
            await client.close()
        self.clients.clear()
        self._retired.clear()
        self._users.clear()
