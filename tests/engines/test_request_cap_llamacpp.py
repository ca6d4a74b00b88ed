"""The request cap bench reads from a real llama-server's /props, where llama.cpp's profile says it reports one
(`request_cap:` /props total_slots): the test bed's build b11434 started with -np 3 gives 3, cited as before."""

from __future__ import annotations

import json
import subprocess
import time
import urllib.error
import urllib.request
from typing import Any

import pytest

from switchover.bench.capbind import engine_version, request_cap
from switchover.subproc import stop
from switchover.testbed import processes
from switchover.testbed.install import installed
from switchover.testbed.layout import Layout, bed_models
from switchover.testing import missing

pytestmark = pytest.mark.engines

CITED = "/props total_slots (https://github.com/ggml-org/llama.cpp/blob/b11434/tools/server/server-context.cpp)"


def _props(url: str, within_s: float) -> dict[str, Any] | None:
    """/props once the model is loaded (llama-server answers 503 while it loads), polled within a bound."""
    deadline = time.monotonic() + within_s
    while time.monotonic() < deadline:
        try:
            with urllib.request.urlopen(f"{url}/props", timeout=2) as res:
                body = json.loads(res.read())
                if isinstance(body, dict) and "total_slots" in body:
                    return body
        except (urllib.error.URLError, OSError, ValueError):
            pass
        time.sleep(0.2)
    return None


def test_a_real_llama_server_started_with_three_slots_reports_a_request_cap_of_three() -> None:
    layout = Layout.default()
    if installed(layout):
        missing("test bed missing")
    port = processes.free_port()
    cmd = processes.llama_command(layout, bed_models(layout)["tiny"], port)
    cmd[cmd.index("-np") + 1] = "3"
    proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        props = _props(f"http://127.0.0.1:{port}", within_s=120)
    finally:
        stop(proc, grace_s=15)
    assert props is not None, "llama-server did not answer /props with total_slots within 120 s"
    info = {"/props": props}
    # the bed's binary is built without its git history (build 0): the release is unknown, the cap still read
    print("build_info:", props.get("build_info"), "version:", engine_version("llamacpp", info))
    assert request_cap("llamacpp", info) == (3, CITED)
