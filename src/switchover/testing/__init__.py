"""Test and benchmark support: one scriptable fake engine, its zero-work fast path, and bounded waits.

* `FakeEngine` (engine.py): a loopback OpenAI-compatible server (aiohttp) scripted per request with fault modes
  (modes.py: status codes, resets, stalls, slow bytes, paced events, malformed SSE, in-band errors, truncation),
  probe behaviours (`Persona`, persona.py), or a raw handler; `.stats` says what it saw.
* `ZeroWorkServer` (zerowork.py): the same API surface with no work at all (raw asyncio protocol, pre-rendered
  responses), so a load generator measured against it measures itself (`switchover bench calibrate`).
* `wait_until` / `await_until` (wait.py): wait for an observable event with a bound, failing with what was
  awaited; `holds_for` / `await_holds` for what must not happen; `require_tool` / `missing` (tools.py): a missing
  external tool skips locally and fails in CI.

Standalone: `python -m switchover.testing zero --port 0 --itl-ms 1` or
`python -m switchover.testing scripted --port 9001 --name new` (see `--help`).
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from switchover.testing.engine import FakeEngine, Stats
    from switchover.testing.persona import Persona
    from switchover.testing.render import chunk, usage_chunk
    from switchover.testing.tools import in_ci, missing, require_tool
    from switchover.testing.wait import WaitTimeout, await_holds, await_until, holds_for, wait_until
    from switchover.testing.zerowork import ZeroWorkServer

# Imported on first use, so the zero-work server and the load generator that measures against it
# (`switchover bench calibrate`) load nothing but what they run (no aiohttp server in their processes).
_WHERE = {
    "FakeEngine": "engine",
    "Stats": "engine",
    "Persona": "persona",
    "chunk": "render",
    "usage_chunk": "render",
    "in_ci": "tools",
    "missing": "tools",
    "require_tool": "tools",
    "WaitTimeout": "wait",
    "await_holds": "wait",
    "await_until": "wait",
    "holds_for": "wait",
    "wait_until": "wait",
    "ZeroWorkServer": "zerowork",
}

__all__ = [
    "FakeEngine",
    "Persona",
    "Stats",
    "WaitTimeout",
    "ZeroWorkServer",
    "await_holds",
    "await_until",
    "chunk",
    "holds_for",
    "in_ci",
    "missing",
    "require_tool",
    "usage_chunk",
    "wait_until",
]


def __getattr__(name: str) -> Any:
    if name not in _WHERE:
        raise AttributeError(f"module 'switchover.testing' has no attribute {name!r}")
    return getattr(importlib.import_module(f"switchover.testing.{_WHERE[name]}"), name)
