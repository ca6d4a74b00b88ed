"""The scriptable fake engine: one loopback OpenAI-compatible server for tests and benchmarks.

Each generation request's behaviour is a fault mode (see `switchover.testing.modes`): from the `X-Fault` header
(`mode[:arg]`, applied when `X-Fault-Arm` is absent, `both`, or this engine's name), else from the script set
with `script()` or `POST /faults` (`{"sequence": [...]}` or `{"weights": {"mode": w, ...}, "seed": n}`), else
`ok`. An `ok` request is answered by the Persona when one is set (probe behaviours: validation, stop strings,
seeds, logprobs...), else with `n` tokens " t0 t1 ...". A test that needs bytes no mode makes sets `handler`:
every request then goes to it. `GET /stats` and `.stats` say what the engine saw.

    async with FakeEngine("new").running() as url: ...
"""

from __future__ import annotations

import asyncio
import contextlib
import random
import threading
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from typing import Any

import orjson
from aiohttp import web

from switchover.testing import modes, persona
from switchover.testing.modes import Stats
from switchover.testing.persona import Persona

__all__ = ["FakeEngine", "Handler", "Stats", "stream_parts"]

Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]


class FakeEngine:
    """The aiohttp application, its fault script, and optionally a persona or a raw handler."""

    def __init__(
        self,
        name: str = "fake",
        model: str | None = None,
        delay_ms: float = 0.0,
        keep_bodies: int = 0,
        persona: Persona | None = None,
        handler: Handler | None = None,
    ) -> None:
        self.name = name
        self.persona = persona
        self.model = model or (persona.served if persona else "fake-model")
        self.delay_s = delay_ms / 1000
        self.keep_bodies = keep_bodies
        self.handler = handler
        self.stats = Stats()
        self.last_headers: dict[str, str] = {}
        self.url = ""
        self._sequence: list[str] = []
        self._weights: list[tuple[str, float]] = []
        self._rng = random.Random(0)
        self._runner: web.AppRunner | None = None
        self._routes: dict[tuple[str, str], Handler] = {
            ("POST", "/v1/completions"): self._generate,
            ("POST", "/v1/chat/completions"): self._generate,
            ("POST", "/v1/embeddings"): self._embeddings,
            ("GET", "/v1/models"): self._models,
            ("GET", "/health"): self._health,
            ("GET", "/stats"): self._stats,
            ("POST", "/faults"): self._faults,
            ("POST", "/tokenize"): self._tokenize,
        }

    # ---- the script ----------------------------------------------------------------------------------------
    def script(self, sequence: list[str] | None = None, weights: dict[str, float] | None = None, seed: int = 0) -> None:
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
            names, w = zip(*self._weights, strict=True)
            return self._rng.choices(names, weights=w)[0]
        return "ok"

    # ---- serving -------------------------------------------------------------------------------------------
    def app(self) -> web.Application:
        app = web.Application()
        app.router.add_route("*", "/{tail:.*}", self._dispatch)
        return app

    async def start(self, host: str = "127.0.0.1", port: int = 0) -> FakeEngine:
        """Serve in this event loop (loopback); sets and returns `self` with `url`."""
        self._runner = web.AppRunner(self.app(), access_log=None, handler_cancellation=True, handle_signals=False)
        await self._runner.setup()
        site = web.TCPSite(self._runner, host, port)
        await site.start()
        server = site._server
        assert server is not None
        self.url = f"http://{host}:{server.sockets[0].getsockname()[1]}"  # type: ignore[attr-defined]
        return self

    async def stop(self) -> None:
        if self._runner is not None:
            await self._runner.cleanup()
            self._runner = None

    @contextlib.contextmanager
    def in_thread(self, host: str = "127.0.0.1", port: int = 0) -> Iterator[str]:
        """Serve from an event loop in a background thread (for synchronous tests); yields the base URL."""
        loop = asyncio.new_event_loop()
        thread = threading.Thread(target=loop.run_forever, name=f"fake-engine-{self.name}", daemon=True)
        thread.start()
        asyncio.run_coroutine_threadsafe(self.start(host, port), loop).result(timeout=30)
        try:
            yield self.url
        finally:
            asyncio.run_coroutine_threadsafe(self.stop(), loop).result(timeout=30)
            loop.call_soon_threadsafe(loop.stop)
            thread.join(timeout=30)
            loop.close()

    @contextlib.asynccontextmanager
    async def running(self, host: str = "127.0.0.1", port: int = 0) -> AsyncIterator[str]:
        """Serve for the duration of the block; yields the base URL."""
        await self.start(host, port)
        try:
            yield self.url
        finally:
            await self.stop()

    async def _dispatch(self, request: web.Request) -> web.StreamResponse:
        self.last_headers = dict(request.headers)
        if self.handler is not None:
            return await self.handler(request)
        route = self._routes.get((request.method, request.path))
        if route is None:
            return web.json_response({"error": {"message": "not found", "type": "not_found", "code": 404}}, status=404)
        return await route(request)

    # ---- routes --------------------------------------------------------------------------------------------
    async def _health(self, request: web.Request) -> web.Response:
        return web.json_response({"ok": True})

    async def _stats(self, request: web.Request) -> web.Response:
        s = self.stats
        return web.json_response(
            {
                "requests": s.requests,
                "by_mode": s.by_mode,
                "completed": s.completed,
                "cancelled": s.cancelled,
                "in_flight": s.in_flight,
            }
        )

    async def _faults(self, request: web.Request) -> web.Response:
        spec = await self._body(request)
        bad = _bad_script(spec)
        if spec is None or bad:  # a 400 naming the field, not a handler traceback or a script that breaks later
            return web.json_response(
                {"error": {"message": bad or "a JSON object", "type": "invalid_request_error", "code": 400}}, status=400
            )
        self.script(spec.get("sequence"), spec.get("weights"), int(spec.get("seed", 0)))
        return web.json_response({"ok": True})

    async def _models(self, request: web.Request) -> web.Response:
        entry: dict[str, Any] = {"id": self.model, "object": "model"}
        if self.persona is not None:
            entry["max_model_len"] = self.persona.context
        return web.json_response({"object": "list", "data": [entry]})

    async def _tokenize(self, request: web.Request) -> web.Response:
        text = ((await self._body(request)) or {}).get("prompt", "")
        if not isinstance(text, str):
            text = ""
        return web.json_response({"tokens": [0] if text == persona.EOS else list(range(1, 2 + len(text) // 3))})

    async def _embeddings(self, request: web.Request) -> web.Response:
        self.stats.requests += 1
        return web.json_response(
            {
                "object": "list",
                "model": self.model,
                "upstream": self.name,
                "data": [{"object": "embedding", "index": 0, "embedding": [0.0]}],
            }
        )

    async def _body(self, request: web.Request) -> dict[str, Any] | None:
        try:
            body = orjson.loads(await request.read())
        except orjson.JSONDecodeError:
            return None
        return body if isinstance(body, dict) else None

    async def _generate(self, request: web.Request) -> web.StreamResponse:
        s = self.stats
        s.requests += 1
        s.in_flight += 1
        try:
            body = await self._body(request)
            if self.keep_bodies and body is not None:
                s.bodies = [*s.bodies[-(self.keep_bodies - 1) :], body] if self.keep_bodies > 1 else [body]
            mode, _, arg = self._pick(request).partition(":")
            if not modes.bad_mode(mode, arg):  # counted by known mode only: a client's X-Fault cannot grow the dict
                s.by_mode[mode] = s.by_mode.get(mode, 0) + 1
            resp = await self._answer(request, body, mode, arg)
            s.completed += 1
            return resp
        except asyncio.CancelledError:
            s.cancelled += 1
            raise
        except ConnectionResetError:  # the client went away while we wrote
            s.cancelled += 1
            raise asyncio.CancelledError from None
        finally:
            s.in_flight -= 1

    async def _answer(
        self, request: web.Request, body: dict[str, Any] | None, mode: str, arg: str
    ) -> web.StreamResponse:
        chat = request.path.endswith("/chat/completions")
        bad = modes.bad_mode(mode, arg)
        if bad:
            return web.json_response(
                {"error": {"message": bad, "type": "invalid_request_error", "code": 400}}, status=400
            )
        if self.persona is not None and mode == "ok":
            return await persona.answer(self.persona, request, body, chat)
        if body is None:
            return web.json_response(
                {"error": {"message": "invalid JSON", "type": "invalid_request_error", "code": 400}}, status=400
            )
        return await modes.respond(modes.Call(request, body, mode, arg, self.model, self.stats), self.delay_s)


def _bad_script(spec: dict[str, Any] | None) -> str | None:
    """What is wrong with a POST /faults body (None: nothing)."""
    if spec is None:
        return None
    seq, weights, seed = spec.get("sequence"), spec.get("weights"), spec.get("seed", 0)
    if seq is not None and not (isinstance(seq, list) and all(isinstance(m, str) for m in seq)):
        return "sequence: a list of mode strings"
    if weights is not None and not (
        isinstance(weights, dict)
        and all(
            isinstance(w, int | float) and not isinstance(w, bool) and 0 <= w < float("inf") for w in weights.values()
        )
        and (not weights or sum(weights.values()) > 0)
    ):
        return "weights: an object of mode -> non-negative number, not all 0"
    try:
        int(seed)
    except (TypeError, ValueError, OverflowError):
        return "seed: an integer"
    for where, entry in [*(("sequence", m) for m in seq or []), *(("weights", m) for m in weights or {})]:
        bad = modes.bad_mode(*entry.partition(":")[::2])
        if bad:  # refused now, not a 400 on every later generation request
            return f"{where}: {bad}"
    return None


async def stream_parts(request: web.Request, parts: list[bytes | float]) -> web.StreamResponse:
    """For a `handler`: write `parts` as an event stream in order; a float is a pause of that many seconds."""
    resp = web.StreamResponse(headers={"Content-Type": "text/event-stream"})
    await resp.prepare(request)
    for p in parts:
        if isinstance(p, float):
            await asyncio.sleep(p)  # the scenario: the pause the test scripted
        else:
            await resp.write(p)
    await resp.write_eof()
    return resp
