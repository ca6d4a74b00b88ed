"""Fixtures: start fake engines with a persona in-process on loopback."""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager

import pytest
from aiohttp import web

from switchover.testing import FakeEngine, Persona


@asynccontextmanager
async def serve(persona: Persona) -> AsyncIterator[str]:
    async with FakeEngine("fake", persona=persona).running() as url:
        yield url


@asynccontextmanager
async def serve_app(app: web.Application) -> AsyncIterator[str]:
    runner = web.AppRunner(app)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    port = site._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        await runner.cleanup()


@pytest.fixture
def fake() -> Callable[[Persona], object]:
    return serve
