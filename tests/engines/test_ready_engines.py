"""`ready` on a real llama-server as it starts: refused, then loading (503 "Loading model"), then ready.

llama-server starts its HTTP server before it loads the model (reference/engines.md §4); SmolLM2 takes a few
hundred ms to load, long enough to be seen with 10 ms polling.
"""

from __future__ import annotations

import asyncio
import subprocess
import time

import pytest

from switchover.subproc import stop
from switchover.testbed import processes
from switchover.testbed.install import installed
from switchover.testbed.layout import Layout, bed_models
from switchover.testing import missing
from switchover.wire.readiness import ReadyState, check_ready

pytestmark = pytest.mark.engines


def test_llama_server_start_is_seen_as_refused_then_loading_then_ready() -> None:
    layout = Layout.default()
    if installed(layout, with_smollm2=True):
        missing("test bed with SmolLM2 missing")
    port = processes.free_port()
    url = f"http://127.0.0.1:{port}"
    proc = subprocess.Popen(
        processes.llama_command(layout, bed_models(layout)["smollm2"], port),
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )

    async def watch() -> list[ReadyState]:
        states: list[ReadyState] = []
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            r = await check_ready(url, max_ms=10000, connect_timeout_s=0.5)
            if not states or states[-1] != r.state:
                states.append(r.state)
            if r.ready:
                break
            await asyncio.sleep(0.01)  # a bounded poll
        return states

    try:
        states = asyncio.run(watch())
    finally:
        stop(proc, grace_s=15)
    assert states[-1] == ReadyState.READY, states
    assert ReadyState.LOADING in states, states
    assert set(states) <= {ReadyState.REFUSED, ReadyState.LOADING, ReadyState.READY}, states
