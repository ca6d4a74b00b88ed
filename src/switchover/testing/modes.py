"""The fault modes of the scriptable fake engine: how one generation request is answered.

A mode is `name[:arg]`:

  ok               a normal response (streamed when asked), `n` tokens (default: max_tokens or 8)
  refuse           the connection is dropped before any response byte (a reset)
  status:CODE      an error status with an OpenAI-style error body (default 503)
  hang:SECONDS     nothing at all for that long (then a normal response): a stall before the first byte
  stall:K          K content events, then nothing until the client goes away: a stall mid-stream
  die_mid:K        K content events, then the connection is cut (no [DONE]): a reset mid-stream
  drip:MS          a normal stream with MS milliseconds between events
  trickle:MS       a normal stream written one byte at a time, MS milliseconds apart (slow bytes)
  malformed:K      K events, then an event whose data is not JSON
  error_event:K    K events, then an in-band `{"error": ...}` event (what engines do on internal errors)
  truncate:K       K events, then a clean end of the body without finish_reason or [DONE]
  no_usage         a normal stream without the usage event even when include_usage asks (engines that ignore it)
  json             the answer is the JSON text {"a": 1} (two events when streamed); usage reports 2 cached tokens
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

from aiohttp import web

from switchover.testing import render

MODES = (
    "ok",
    "refuse",
    "status",
    "hang",
    "stall",
    "die_mid",
    "drip",
    "trickle",
    "malformed",
    "error_event",
    "truncate",
    "no_usage",
    "json",
)
JSON_PIECES = ('{"a":', " 1}")
ID = "cmpl-fake"
_CUT_AFTER_K = ("stall", "die_mid", "malformed", "error_event", "truncate")  # modes whose arg is K events


@dataclass
class Stats:
    """What the engine saw (for assertions)."""

    requests: int = 0
    by_mode: dict[str, int] = field(default_factory=dict)
    completed: int = 0
    cancelled: int = 0  # the client went away before the response ended
    in_flight: int = 0
    events: int = 0  # SSE events written (all streams)
    bodies: list[dict[str, Any]] = field(default_factory=list)  # last few parsed request bodies


@dataclass
class Call:
    """One generation request being answered."""

    request: web.Request
    body: dict[str, Any]
    mode: str
    arg: str
    model: str
    stats: Stats | None = None  # the engine's: `events` counts what was written

    @property
    def chat(self) -> bool:
        return self.request.path.endswith("/chat/completions")

    @property
    def n(self) -> int:
        return int(self.body.get("max_tokens") or self.body.get("max_completion_tokens") or 8)

    def event(self, text: str, finish: str | None = None) -> bytes:
        return render.chunk(text, finish, self.chat, model=self.model, id_=ID, empty_delta=True)


def _abort(call: Call) -> web.HTTPException:
    assert call.request.transport is not None
    call.request.transport.abort()
    return web.HTTPBadGateway()  # nothing reaches the client: the connection is already gone


def _status(call: Call) -> web.Response:
    code = int(call.arg or 503)
    return web.json_response(render.error_body(code, f"scripted {code}"), status=code)


def _whole(call: Call) -> web.Response:
    text = "".join(JSON_PIECES) if call.mode == "json" else "".join(f" t{i}" for i in range(call.n))
    obj = render.whole(call.chat, text, model=call.model, prompt_tokens=3, completion_tokens=call.n, id_=ID)
    if call.mode == "json":
        obj["usage"]["prompt_tokens_details"] = {"cached_tokens": 2}
    return web.json_response(obj)


class _Writer:
    """Writes a stream's bytes, whole or one byte at a time (trickle)."""

    def __init__(self, resp: web.StreamResponse, byte_gap_s: float) -> None:
        self.resp, self.byte_gap_s = resp, byte_gap_s

    async def write(self, data: bytes) -> None:
        if not self.byte_gap_s:
            await self.resp.write(data)
            return
        for i in range(len(data)):
            await self.resp.write(data[i : i + 1])
            await asyncio.sleep(self.byte_gap_s)  # the scenario: slow bytes


async def _end_normally(call: Call, out: _Writer) -> None:
    await out.write(call.event("", "length"))
    opts = call.body.get("stream_options") or {}
    if opts.get("include_usage") and call.mode != "no_usage":
        u = render.usage(3, call.n)
        if call.mode == "json":
            u = render.usage(3, len(JSON_PIECES), cached=2)
        await out.write(render.sse({"id": "x", "object": "chunk", "model": call.model, "choices": [], "usage": u}))
    await out.write(render.DONE)


async def _end_cut(call: Call, out: _Writer) -> None:
    raise _abort(call)


async def _end_malformed(call: Call, out: _Writer) -> None:
    await out.write(b'data: {"choices": [{"delta": {"content": "x"\n\n')


async def _end_error_event(call: Call, out: _Writer) -> None:
    await out.write(b'data: {"error": {"message": "scripted engine error", "code": 500}}\n\n')


async def _end_silent(call: Call, out: _Writer) -> None:
    pass


async def _end_stall(call: Call, out: _Writer) -> None:
    await asyncio.sleep(3600)  # the scenario: an engine that stops mid-stream (the client's timeout ends it)


_ENDINGS: dict[str, Callable[[Call, _Writer], Awaitable[None]]] = {
    "die_mid": _end_cut,
    "malformed": _end_malformed,
    "error_event": _end_error_event,
    "truncate": _end_silent,
    "stall": _end_stall,
}


async def _stream(call: Call) -> web.StreamResponse:
    resp = web.StreamResponse(headers={"Content-Type": "text/event-stream", "Cache-Control": "no-cache"})
    await resp.prepare(call.request)
    cut = call.mode in _CUT_AFTER_K
    k = int(call.arg) if call.arg and cut else call.n
    gap = float(call.arg) / 1000 if call.mode == "drip" and call.arg else 0.0
    out = _Writer(resp, float(call.arg) / 1000 if call.mode == "trickle" and call.arg else 0.0)
    texts = list(JSON_PIECES) if call.mode == "json" else [f" t{i}" for i in range(min(k, call.n))]
    for text in texts:
        await out.write(call.event(text))
        if call.stats is not None:
            call.stats.events += 1
        if gap:
            await asyncio.sleep(gap)  # the scenario: paced events
    if cut and k:
        await asyncio.sleep(0.05)  # let the good events leave first, so the fault lands after the first byte
    await _ENDINGS.get(call.mode, _end_normally)(call, out)
    return resp


def bad_mode(mode: str, arg: str) -> str | None:
    """Why `mode:arg` is not a fault this engine knows (None: it is one); a misspelt fault must not pass as `ok`."""
    if mode not in MODES:
        return f"unknown fault mode {mode[:40]!r} (known: {', '.join(MODES)})"
    if not arg:
        return None
    try:
        if mode == "status":
            ok = 100 <= int(arg) <= 599
        elif mode in _CUT_AFTER_K:
            ok = 0 <= int(arg) <= 1_000_000
        elif mode in ("hang", "drip", "trickle"):
            ok = 0 <= float(arg) <= 3_600_000  # NaN compares False: refused
        else:
            ok = True
    except ValueError:
        ok = False
    return None if ok else f"bad argument {arg[:40]!r} for fault mode {mode!r}"


async def respond(call: Call, delay_s: float = 0.0) -> web.StreamResponse:
    """Answer one generation request as its mode says (raises for the modes that cut the connection)."""
    if call.mode == "refuse":
        raise _abort(call)
    if call.mode == "status":
        return _status(call)
    if call.mode == "hang":
        await asyncio.sleep(float(call.arg or 3600))  # the scenario: no byte for that long
    if delay_s:
        await asyncio.sleep(delay_s)  # the engine's configured latency
    if not call.body.get("stream"):
        return _whole(call)
    return await _stream(call)
