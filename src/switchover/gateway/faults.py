"""A scriptable fault-injecting OpenAI-compatible upstream, for the gateway's reliability tests and benchmarks.

Each request's behaviour comes from the `X-Fault` header (`mode[:arg]`, applied when `X-Fault-Arm` is
absent, `both`, or this upstream's name), else from the script set with `POST /faults`
(`{"sequence": [...]}` or `{"weights": {"mode": w, ...}, "seed": n}`), else `ok`. Modes:

  ok               a normal response (streamed when asked), `n` tokens (default: max_tokens or 8)
  refuse           the connection is dropped before any response byte
  status:CODE      an error status with an OpenAI-style error body
  hang:SECONDS     nothing at all for that long (then a normal response)
  die_mid:K        K content events, then the connection is cut (no [DONE])
  drip:MS          a normal stream with MS milliseconds between events
  malformed:K      K events, then an event whose data is not JSON
  error_event:K    K events, then an in-band `{"error": ...}` event (what engines do on internal errors)
  truncate:K       K events, then a clean end of the body without finish_reason or [DONE]
  json             the answer is the JSON text {"a": 1} (two events when streamed); usage reports 2 cached tokens

Run standalone: `python -m switchover.gateway.faults --port 9001 --name new --delay-ms 0`.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import random
import time
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from typing import Any

import orjson
from aiohttp import web

MODES = ("ok", "refuse", "status", "hang", "die_mid", "drip", "malformed", "error_event", "truncate", "json")
JSON_PIECES = ('{"a":', " 1}")


@dataclass
class Stats:
    """What the upstream saw (for assertions)."""

    requests: int = 0
    by_mode: dict[str, int] = field(default_factory=dict)
    completed: int = 0
    cancelled: int = 0  # the client (the gateway) went away before the response ended
    in_flight: int = 0
    bodies: list[dict[str, Any]] = field(default_factory=list)  # last few parsed request bodies


class FaultUpstream:
    """The aiohttp application and its fault script."""

    def __init__(self, name: str, model: str = "fake-model", delay_ms: float = 0.0, keep_bodies: int = 0) -> None:
        self.name = name
        self.model = model
        self.delay_s = delay_ms / 1000
        self.keep_bodies = keep_bodies
        self.stats = Stats()
        self._sequence: list[str] = []
        self._weights: list[tuple[str, float]] = []
        self._rng = random.Random(0)

    def script(self, sequence: list[str] | None = None, weights: dict[str, float] | None = None,
               seed: int = 0) -> None:
        """Set what the next requests do (a sequence is consumed first, then weighted random, then ok)."""
        self._sequence = list(sequence or [])
        self._weights = list((weights or {}).items())
        self._rng = random.Random(seed)

    def _pick(self, request: web.Request) -> str:
        header = request.headers.get("X-Fault")
        target = request.headers.get("X-Fault-Arm", "both")
        if header and target in ("both", self.name):
            return header
        if self._sequence:
            return self._sequence.pop(0)
        if self._weights:
            modes, w = zip(*self._weights, strict=True)
            return self._rng.choices(modes, weights=w)[0]
        return "ok"

    def app(self) -> web.Application:
        app = web.Application()
        app.router.add_post("/v1/completions", self._generate)
        app.router.add_post("/v1/chat/completions", self._generate)
        app.router.add_post("/v1/embeddings", self._embeddings)
        app.router.add_get("/v1/models", self._models)
        app.router.add_get("/health", self._health)
        app.router.add_get("/stats", self._stats)
        app.router.add_post("/faults", self._faults)
        return app

    async def _health(self, request: web.Request) -> web.Response:
        return web.json_response({"ok": True})

    async def _stats(self, request: web.Request) -> web.Response:
        s = self.stats
        return web.json_response({"requests": s.requests, "by_mode": s.by_mode, "completed": s.completed,
                                  "cancelled": s.cancelled, "in_flight": s.in_flight})

    async def _faults(self, request: web.Request) -> web.Response:
        spec = await request.json()
        self.script(spec.get("sequence"), spec.get("weights"), int(spec.get("seed", 0)))
        return web.json_response({"ok": True})

    async def _models(self, request: web.Request) -> web.Response:
        return web.json_response({"object": "list", "data": [{"id": self.model, "object": "model"}]})

    async def _embeddings(self, request: web.Request) -> web.Response:
        self.stats.requests += 1
        return web.json_response({"object": "list", "model": self.model, "upstream": self.name,
                                  "data": [{"object": "embedding", "index": 0, "embedding": [0.0]}]})

    async def _generate(self, request: web.Request) -> web.StreamResponse:
        s = self.stats
        s.requests += 1
        s.in_flight += 1
        body = await request.json()
        if self.keep_bodies:
            s.bodies = [*s.bodies[-(self.keep_bodies - 1):], body] if self.keep_bodies > 1 else [body]
        spec = self._pick(request)
        mode, _, arg = spec.partition(":")
        s.by_mode[mode] = s.by_mode.get(mode, 0) + 1
        try:
            resp = await self._respond(request, body, mode, arg)
            s.completed += 1
            return resp
        except asyncio.CancelledError:
            s.cancelled += 1
            raise
        except ConnectionResetError:  # the client (the gateway) went away while we wrote
            s.cancelled += 1
            raise asyncio.CancelledError from None
        finally:
            s.in_flight -= 1

    async def _respond(self, request: web.Request, body: dict[str, Any], mode: str, arg: str) -> web.StreamResponse:
        chat = request.path.endswith("/chat/completions")
        n = int(body.get("max_tokens") or body.get("max_completion_tokens") or 8)
        if mode == "refuse":
            assert request.transport is not None
            request.transport.abort()
            raise web.HTTPBadGateway()  # nothing reaches the client: the connection is already gone
        if mode == "status":
            code = int(arg or 503)
            return web.json_response({"error": {"message": f"scripted {code}", "type": "server_error",
                                                "code": code}}, status=code)
        if mode == "hang":
            await asyncio.sleep(float(arg or 3600))
        if self.delay_s:
            await asyncio.sleep(self.delay_s)
        if not body.get("stream"):
            whole = self._whole(chat, n)
            if mode == "json":
                choice = whole["choices"][0]
                choice["message" if chat else "text"] = ({"role": "assistant", "content": "".join(JSON_PIECES)}
                                                         if chat else "".join(JSON_PIECES))
                whole["usage"]["prompt_tokens_details"] = {"cached_tokens": 2}
            return web.json_response(whole)
        resp = web.StreamResponse(headers={"Content-Type": "text/event-stream", "Cache-Control": "no-cache"})
        await resp.prepare(request)
        k = int(arg) if arg and mode in ("die_mid", "malformed", "error_event", "truncate") else n
        gap = float(arg) / 1000 if mode == "drip" and arg else 0.0
        texts = list(JSON_PIECES) if mode == "json" else [f" t{i}" for i in range(min(k, n))]
        for text in texts:
            await resp.write(self._event(chat, text, None))
            if gap:
                await asyncio.sleep(gap)
        if mode in ("die_mid", "malformed", "error_event", "truncate") and k:
            await asyncio.sleep(0.05)  # let the good events leave first, so the fault lands after the first byte
        if mode == "die_mid":
            assert request.transport is not None
            request.transport.abort()
            raise web.HTTPBadGateway()
        if mode == "malformed":
            await resp.write(b'data: {"choices": [{"delta": {"content": "x"\n\n')
            return resp
        if mode == "error_event":
            await resp.write(b'data: {"error": {"message": "scripted engine error", "code": 500}}\n\n')
            return resp
        if mode == "truncate":
            return resp
        await resp.write(self._event(chat, "", "length"))
        opts = body.get("stream_options") or {}
        if opts.get("include_usage") and mode != "no_usage":  # no_usage: an engine that ignores include_usage
            usage: dict[str, Any] = {"prompt_tokens": 3, "completion_tokens": n, "total_tokens": n + 3}
            if mode == "json":
                usage.update(completion_tokens=len(JSON_PIECES), prompt_tokens_details={"cached_tokens": 2})
            await resp.write(b"data: " + orjson.dumps({"id": "x", "object": "chunk", "model": self.model,
                                                       "choices": [], "usage": usage}) + b"\n\n")
        await resp.write(b"data: [DONE]\n\n")
        return resp

    def _event(self, chat: bool, text: str, finish: str | None) -> bytes:
        choice: dict[str, Any] = {"index": 0, "finish_reason": finish}
        if chat:
            choice["delta"] = {"content": text} if text else {}
        else:
            choice["text"] = text
        obj = {"id": "cmpl-fake", "object": "chat.completion.chunk" if chat else "text_completion",
               "created": int(time.time()), "model": self.model, "choices": [choice]}
        return b"data: " + orjson.dumps(obj) + b"\n\n"

    def _whole(self, chat: bool, n: int) -> dict[str, Any]:
        text = "".join(f" t{i}" for i in range(n))
        choice: dict[str, Any] = {"index": 0, "finish_reason": "length"}
        if chat:
            choice["message"] = {"role": "assistant", "content": text}
        else:
            choice["text"] = text
        return {"id": "cmpl-fake", "object": "chat.completion" if chat else "text_completion",
                "created": int(time.time()), "model": self.model, "choices": [choice],
                "usage": {"prompt_tokens": 3, "completion_tokens": n, "total_tokens": n + 3}}


@contextlib.asynccontextmanager
async def running(upstream: FaultUpstream, host: str = "127.0.0.1", port: int = 0) -> AsyncIterator[str]:
    """Serve `upstream` in this event loop; yields its base URL."""
    runner = web.AppRunner(upstream.app(), access_log=None, handler_cancellation=True)
    await runner.setup()
    site = web.TCPSite(runner, host, port)
    await site.start()
    server = site._server
    assert server is not None
    bound = server.sockets[0].getsockname()[1]  # type: ignore[attr-defined]
    try:
        yield f"http://{host}:{bound}"
    finally:
        await runner.cleanup()


def main() -> None:
    ap = argparse.ArgumentParser(description="Fault-injecting OpenAI-compatible upstream (loopback only).")
    ap.add_argument("--port", type=int, required=True)
    ap.add_argument("--name", default="new")
    ap.add_argument("--model", default="fake-model")
    ap.add_argument("--delay-ms", type=float, default=0.0)
    args = ap.parse_args()
    web.run_app(FaultUpstream(args.name, args.model, args.delay_ms).app(), host="127.0.0.1", port=args.port,
                access_log=None, print=None)


if __name__ == "__main__":
    main()


DEFAULT_MIX: dict[str, float] = {
    "ok": 40, "status:503": 8, "status:500": 4, "status:400": 2, "refuse": 6, "hang:1.5": 4, "die_mid:0": 4,
    "die_mid:2": 6, "drip:5": 6, "malformed:0": 3, "malformed:2": 5,
    "error_event:1": 4, "truncate:2": 4, "hang:0.05": 4}


async def fault_matrix(run_dir: Any, n: int, concurrency: int = 32, seed: int = 1,
                       mix: dict[str, float] | None = None) -> dict[str, Any]:
    """Send `n` requests (stream and not, chat and completions) through a gateway whose two upstreams fail at
    random; returns counts to check that every request got exactly one ledger row and none hung."""
    import aiohttp

    from switchover.config import Migration
    from switchover.gateway.app import Gateway
    from switchover.gateway.ledger import read_requests
    from switchover.gateway.server import running as running_gateway

    mix = mix or DEFAULT_MIX
    old, new = FaultUpstream("old"), FaultUpstream("new")
    old.script(weights=mix, seed=seed)
    new.script(weights=mix, seed=seed + 1)
    timeouts = {"connect_ms": 500, "first_byte_ms": 1000, "idle_ms": 500}
    bound_s = (300 + 1000 + 500 * 2) / 1000 + 1.0  # fallback wait + old first byte + idle gaps + 1 s slack
    rng = random.Random(seed)
    async with running(old) as old_url, running(new) as new_url:
        m = Migration.model_validate({
            "old": {"url": old_url, "engine": "vllm"}, "new": {"url": new_url, "engine": "llamacpp"},
            "gateway": {"weight": 50, "run_dir": str(run_dir), "fallback": {"on_timeout_ms": 300},
                        "timeouts": timeouts, "kill_switch": {"enabled": False},
                        "shadow": {"percent": 10, "max_concurrency": 4, "timeout_ms": 1500}}})
        gw = Gateway(m, None, run_dir=run_dir)
        durations: list[float] = []
        statuses: dict[int, int] = {}
        sent: list[str] = []
        sem = asyncio.Semaphore(concurrency)
        lag = 0.0

        async def watch_lag() -> None:  # CPU starvation delays everything; measure it to judge the bound
            nonlocal lag
            while True:
                t = time.perf_counter()
                await asyncio.sleep(0.01)
                lag = max(lag, time.perf_counter() - t - 0.01)

        watcher = asyncio.ensure_future(watch_lag())
        t_start = time.perf_counter()
        async with running_gateway(gw, port=0) as url, aiohttp.ClientSession(
                connector=aiohttp.TCPConnector(limit=concurrency)) as http:

            async def one(i: int) -> None:
                rid = f"req-{i:06d}"
                sent.append(rid)
                stream = rng.random() < 0.6
                chat = rng.random() < 0.5
                path = "/v1/chat/completions" if chat else "/v1/completions"
                body: dict[str, Any] = {"model": "fake-model", "max_tokens": rng.randint(1, 6), "stream": stream}
                body["messages" if chat else "prompt"] = [{"role": "user", "content": "hi"}] if chat else "hi"
                async with sem:
                    t0 = time.perf_counter()
                    try:
                        async with http.post(url + path, data=orjson.dumps(body), timeout=aiohttp.ClientTimeout(
                                total=bound_s + 5), headers={"X-Request-Id": rid, "x-tenant-id": f"t{i % 97}"}) as r:
                            await r.read()
                            statuses[r.status] = statuses.get(r.status, 0) + 1
                    except (aiohttp.ClientError, TimeoutError) as exc:
                        key = -1 if not isinstance(exc, TimeoutError) else -2
                        statuses[key] = statuses.get(key, 0) + 1
                    durations.append(time.perf_counter() - t0)

            await asyncio.gather(*(one(i) for i in range(n)))
            elapsed = time.perf_counter() - t_start
            for _ in range(100):  # rows of requests with a mirror still running are written when it ends
                if gw.ledger.written >= n:
                    break
                await asyncio.sleep(0.05)
        watcher.cancel()
        rows = list(read_requests(run_dir))  # request rows only: shadow rows repeat a request_id
    ids = [r.request_id for r in rows]
    outcomes: dict[str, int] = {}
    for r in rows:
        outcomes[r.outcome] = outcomes.get(r.outcome, 0) + 1
    return {"requests": n, "rows": len(rows), "missing": len(set(sent) - set(ids)),
            "duplicates": len(ids) - len(set(ids)), "outcomes": outcomes, "client_statuses": statuses,
            "max_duration_s": max(durations), "bound_s": bound_s, "elapsed_s": elapsed, "max_loop_lag_s": lag,
            "over_bound": sum(d >= bound_s for d in durations),
            "fallbacks": sum(1 for r in rows if r.fallback_reason)}
