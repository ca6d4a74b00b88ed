"""A scriptable in-process OpenAI-compatible server for wire tests (loopback, aiohttp)."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable

import orjson
from aiohttp import web

Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]


def chunk(text: str, finish: str | None = None, chat: bool = True, index: int = 0) -> bytes:
    choice: dict = {"index": index, "finish_reason": finish}
    if chat:
        choice["delta"] = {"content": text}
    else:
        choice["text"] = text
    obj = {"id": "cmpl-1", "object": "chat.completion.chunk", "model": "m", "choices": [choice]}
    return b"data: " + orjson.dumps(obj) + b"\n\n"


def usage_chunk(prompt: int, completion: int, cached: int | None = None) -> bytes:
    usage: dict = {"prompt_tokens": prompt, "completion_tokens": completion, "total_tokens": prompt + completion}
    if cached is not None:
        usage["prompt_tokens_details"] = {"cached_tokens": cached}
    return b"data: " + orjson.dumps({"id": "cmpl-1", "model": "m", "choices": [], "usage": usage}) + b"\n\n"


async def sse(request: web.Request, parts: list[bytes | float]) -> web.StreamResponse:
    """Write parts in order; a float is a pause in seconds."""
    resp = web.StreamResponse(headers={"Content-Type": "text/event-stream"})
    await resp.prepare(request)
    for p in parts:
        if isinstance(p, float):
            await asyncio.sleep(p)
        else:
            await resp.write(p)
    await resp.write_eof()
    return resp


class FakeServer:
    """Routes POST /v1/chat/completions and /v1/completions to the current handler."""

    def __init__(self) -> None:
        self.handler: Handler | None = None
        self.last_headers: dict[str, str] = {}
        self.runner: web.AppRunner | None = None
        self.url = ""

    async def _dispatch(self, request: web.Request) -> web.StreamResponse:
        self.last_headers = dict(request.headers)
        assert self.handler is not None
        return await self.handler(request)

    async def start(self) -> FakeServer:
        app = web.Application()
        app.router.add_route("*", "/{tail:.*}", self._dispatch)
        self.runner = web.AppRunner(app, handle_signals=False)
        await self.runner.setup()
        site = web.TCPSite(self.runner, "127.0.0.1", 0)
        await site.start()
        port = site._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]
        self.url = f"http://127.0.0.1:{port}"
        return self

    async def stop(self) -> None:
        if self.runner:
            await self.runner.cleanup()
