"""Open a page in headless Chromium (Debian package `chromium`): the DOM after scripts ran, and every
console message (console.* calls and uncaught errors) from --enable-logging=stderr."""

from __future__ import annotations

import re
import subprocess
import tempfile
from dataclasses import dataclass
from pathlib import Path

from switchover.testing import require_tool

FLAGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
    "--enable-logging=stderr",
    "--v=0",
    "--virtual-time-budget=8000",
]
_CONSOLE = re.compile(r":CONSOLE[^\]]*\]\s*(.*)")


def chromium_or_skip() -> str:
    return require_tool("chromium", "chromium-browser", hint="apt-get update && apt-get install -y chromium")


@dataclass
class Page:
    dom: str
    console: list[str]
    returncode: int


def load(exe: str, page: Path, *, screenshot: Path | None = None, timeout_s: float = 90.0) -> Page:
    """One run of Chromium on `page` with a fresh profile; `screenshot` adds a PNG of a tall window."""
    with tempfile.TemporaryDirectory(prefix="switchover-chromium-") as profile:
        mode = [f"--screenshot={screenshot}", "--window-size=1280,2400"] if screenshot else ["--dump-dom"]
        proc = subprocess.run(
            [exe, *FLAGS, f"--user-data-dir={profile}", *mode, page.resolve().as_uri()],
            capture_output=True,
            text=True,
            timeout=timeout_s,
            check=False,
        )
    console = [m.group(1) for line in proc.stderr.splitlines() if (m := _CONSOLE.search(line))]
    return Page(dom=proc.stdout, console=console, returncode=proc.returncode)
