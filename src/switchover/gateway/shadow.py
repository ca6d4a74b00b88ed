"""Shadow traffic: a sampled copy of a request sent to new (or a third upstream), streamed and measured,
never returned to the client and never awaited by the primary path. Beyond `max_concurrency` mirrors in
flight a copy is dropped (and counted) instead of queued, so a slow shadow cannot slow the primary."""

from __future__ import annotations

import asyncio
import random
import time
from typing import Any

import aiohttp
import orjson

from switchover.gateway.config import ShadowConfig
from switchover.gateway.ledger_record import ShadowResult
from switchover.gateway.observe import Observer
from switchover.gateway.upstream import send

GENERATION_PATHS = ("/v1/completions", "/v1/chat/completions")


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


class Shadow:
    """Starts mirrors and bounds how many run at once."""

    def __init__(self, session: aiohttp.ClientSession, rng: random.Random | None = None) -> None:
        self.session = session
        self.rng = rng or random.Random()
        self.in_flight = 0
        self.tasks: set[asyncio.Task[ShadowResult]] = set()

    def sampled(self, cfg: ShadowConfig) -> bool:
        return cfg.percent > 0 and (cfg.percent >= 100 or self.rng.random() * 100 < cfg.percent)

    def start(self, cfg: ShadowConfig, url: str, name: str, body: bytes, headers: dict[str, str],
              connect_timeout_s: float) -> asyncio.Task[ShadowResult] | ShadowResult:
        """A running mirror, or a dropped ShadowResult when the bound is full."""
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

    async def _run(self, cfg: ShadowConfig, url: str, name: str, body: bytes, headers: dict[str, str],
                   connect_timeout_s: float) -> ShadowResult:
        t0 = time.perf_counter_ns()
        obs = Observer()
        status: int | None = None
        error: str | None = None
        timeout = aiohttp.ClientTimeout(total=cfg.timeout_ms / 1000, connect=connect_timeout_s)
        try:
            async with await send(self.session, "POST", url, data=body, headers=headers, timeout=timeout) as resp:
                status = resp.status
                if status >= 300:
                    error = f"status_{status}"
                    await resp.read()
                elif resp.headers.get("Content-Type", "").startswith("text/event-stream"):
                    async for chunk in resp.content.iter_any():
                        obs.feed(chunk, time.perf_counter_ns())
                    obs.finish(time.perf_counter_ns())
                    if obs.error:
                        error = "stream_error"
                    elif obs.malformed:
                        error = "malformed"
                    elif not obs.complete:
                        error = "truncated"
                else:
                    obs.body(await resp.read(), time.perf_counter_ns())
        except asyncio.CancelledError:
            error = "cancelled"
        except TimeoutError:
            error = "timeout"
        except aiohttp.ClientConnectorError:
            error = "connect"
        except (aiohttp.ClientError, ConnectionError) as exc:
            error = f"disconnected ({type(exc).__name__}: {str(exc)[:120]})"
        end = obs.last_ns or time.perf_counter_ns()
        ttft = None if obs.first_content_ns is None else (obs.first_content_ns - t0) / 1e6
        n = obs.completion_tokens
        tpot = None
        if ttft is not None and n and n > 1:
            tpot = ((end - t0) / 1e6 - ttft) / (n - 1)
        return ShadowResult(upstream=name, dropped=False, status=status, ttft_ms=ttft, tpot_ms=tpot,
                            e2e_ms=(end - t0) / 1e6 if status is not None else None,
                            completion_tokens=n, finish_reason=obs.finish_reason, error=error)

    async def close(self) -> None:
        for t in list(self.tasks):
            t.cancel()
        if self.tasks:
            await asyncio.gather(*self.tasks, return_exceptions=True)
