"""Fixtures: start fake engines with a persona in-process on loopback."""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager

import pytest

from switchover.testing import FakeEngine, Persona


@asynccontextmanager
async def serve(persona: Persona) -> AsyncIterator[str]:
    async with FakeEngine("fake", persona=persona).running() as url:
        yield url


@pytest.fixture
def fake() -> Callable[[Persona], object]:
    return serve
