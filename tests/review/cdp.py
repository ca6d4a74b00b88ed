"""Drive headless Chromium over the DevTools protocol (a websocket, aiohttp's client): open a page, evaluate
JavaScript in it, wait for a condition. Enough to click buttons and read what a page shows."""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import os
import signal
import subprocess
import tempfile
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import aiohttp

from tests.report.chromium import chromium_or_skip

FLAGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
    "--remote-debugging-port=0",
]


class Tab:
    """One page target and its websocket."""

    def __init__(self, ws: aiohttp.ClientWebSocketResponse) -> None:
        self.ws = ws
        self.ids = itertools.count(1)
        self.console: list[str] = []

    async def call(self, method: str, **params: Any) -> dict[str, Any]:
        msg_id = next(self.ids)
        await self.ws.send_json({"id": msg_id, "method": method, "params": params})
        while True:
            msg = await asyncio.wait_for(self.ws.receive_json(), 20)
            if msg.get("method") in ("Runtime.exceptionThrown", "Runtime.consoleAPICalled"):
                self.console.append(str(msg.get("params"))[:300])
            if msg.get("id") == msg_id:
                if "error" in msg:
                    raise AssertionError(f"{method}: {msg['error']}")
                return dict(msg.get("result") or {})

    async def eval(self, expression: str) -> Any:
        out = await self.call("Runtime.evaluate", expression=expression, returnByValue=True, awaitPromise=True)
        if "exceptionDetails" in out:
            raise AssertionError(f"{expression}: {out['exceptionDetails']}")
        return out["result"].get("value")

    async def wait(self, expression: str, timeout: float = 10.0) -> Any:
        """The value of `expression` once it is truthy (polled every 50 ms, bounded); an expression that throws
        (the element is not there yet) counts as not yet."""
        last = ""
        for _ in range(int(timeout / 0.05)):
            try:
                value = await self.eval(expression)
            except AssertionError as exc:
                value, last = None, str(exc)[:300]
            if value:
                return value
            await asyncio.sleep(0.05)  # a bounded poll
        raise AssertionError(f"never true: {expression} {last}")


@contextlib.asynccontextmanager
async def chromium(url: str) -> AsyncIterator[Tab]:
    """Headless Chromium with a fresh profile showing `url`; stopped on exit."""
    exe = chromium_or_skip()
    # Chromium's helper processes may still touch the profile as it exits: cleanup errors are not the test's
    with tempfile.TemporaryDirectory(prefix="switchover-cdp-", ignore_cleanup_errors=True) as profile:
        proc = subprocess.Popen(
            [exe, *FLAGS, f"--user-data-dir={profile}", "about:blank"],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            start_new_session=True,
        )
        try:
            port_file = Path(profile) / "DevToolsActivePort"
            for _ in range(400):  # Chromium writes its port here once listening
                if port_file.exists() and port_file.read_text().strip():
                    break
                await asyncio.sleep(0.05)  # a bounded poll
            port = int(port_file.read_text().split()[0])
            async with aiohttp.ClientSession() as http:
                async with http.get(f"http://127.0.0.1:{port}/json/list") as r:
                    pages = [t for t in await r.json() if t.get("type") == "page"]
                async with http.ws_connect(pages[0]["webSocketDebuggerUrl"], max_msg_size=0) as ws:
                    tab = Tab(ws)
                    await tab.call("Runtime.enable")
                    await tab.call("Page.enable")
                    await tab.call("Page.navigate", url=url)
                    await tab.wait(f"location.href === {url!r} && document.readyState === 'complete'")
                    yield tab
        finally:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(proc.pid, signal.SIGTERM)  # the browser and its helper processes
            try:
                proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(proc.pid, signal.SIGKILL)
                proc.wait()
