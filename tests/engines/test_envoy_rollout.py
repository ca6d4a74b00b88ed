"""A rollout driven by `switchover rollout` through each data plane (the built-in gateway and Envoy): shadow -> 5 %
-> 50 % -> 100 % in front of two zero-work servers (`python -m switchover.testing zero`), the split within 3 points
of each weight over 2,000 requests with a ledger row for every request, a shadow gate decision, and the kill
switch effective within 1 s of its trip; then the same plane in front of the bed's vLLM CPU (old) and
llama-server (new), streaming. Run under the engines lock (docs/gateway.md, Data planes)."""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import aiohttp
import orjson
import pytest

from switchover.gateway.ledger import ledger_files
from switchover.subproc import stop
from switchover.testbed.processes import free_port
from switchover.testing import wait_until
from tests.export.test_envoy import _envoy

pytestmark = pytest.mark.engines
SRC = str(Path(__file__).resolve().parents[2] / "src")
ENV = {**os.environ, "PYTHONPATH": SRC + os.pathsep + os.environ.get("PYTHONPATH", ""), "SWITCHOVER_ACTOR": "ci"}
PLANES = ["builtin", "envoy"]
PER_STAGE = 2000


def _zero() -> tuple[subprocess.Popen, str]:
    proc = subprocess.Popen(
        [sys.executable, "-m", "switchover.testing", "zero", "--port", "0", "--chunks", "4"],
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        env=ENV,
        text=True,
    )
    assert proc.stdout is not None
    port = proc.stdout.readline().strip()
    assert port.isdigit(), f"zero-work server printed {port!r}"
    return proc, f"http://127.0.0.1:{port}"


def _config(plane: str, old: str, new: str, port: int) -> str:
    envoy = f"  envoy: {{binary: {_envoy()}, admin_port: {free_port()}, concurrency: 2}}\n" if plane == "envoy" else ""
    return f"""\
old: {{url: "{old}", engine: vllm}}
new: {{url: "{new}", engine: llamacpp}}
gateway:
  data_plane: {plane}
  weight: 0            # the rollout drives this line
  rollback: false
  run_dir: run
  reload_poll_s: 0.1
  listen: {{port: {port}}}
  kill_switch: {{window: 3, min_samples: 20, max_fallback_ratio: 0.2}}
  shadow: {{percent: 20}}
  drain_seconds: 2
{envoy}rollout:
  stages: [shadow, 5, 50, 100]
  window_s: 3600
  entry: {{enabled: false}}
  gates:
    min_samples: 20
    # two identical zero-work servers: the shadow is judged on what they answer, not on their shared CPU's timing
    shadow_metrics: [output_tokens, finish_reason, stop_hit, error_code]
"""


class Plane:
    """`switchover gateway -c switchover.yaml` as a process, and the CLI beside it."""

    def __init__(self, config: Path) -> None:
        self.config = config
        self.run_dir = config.parent / "run"
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "switchover", "gateway", "--config", str(config)],
            env=ENV,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        wait_until(
            lambda: self.proc.poll() is not None or (self.run_dir / "gateway.json").exists(), 60, "the gateway's start"
        )
        assert self.proc.poll() is None, f"switchover gateway exited with {self.proc.returncode}"

    def cli(self, *args: str) -> subprocess.CompletedProcess:
        return subprocess.run(
            [sys.executable, "-m", "switchover", *args, "--config", str(self.config)],
            capture_output=True,
            text=True,
            timeout=120,
            env=ENV,
        )

    def state(self) -> dict[str, Any]:
        return json.loads(self.cli("gateway", "state", "--json").stdout)

    def rows(self) -> list[dict[str, Any]]:
        out = []
        for f in ledger_files(self.run_dir):
            for line in f.read_bytes().splitlines():
                row = orjson.loads(line)
                if row.get("kind", "request") == "request":
                    out.append(row)
        return out


@pytest.fixture
def zero_pair() -> Iterator[tuple[tuple[subprocess.Popen, str], tuple[subprocess.Popen, str]]]:
    old, new = _zero(), _zero()
    try:
        yield old, new
    finally:
        stop(old[0])
        stop(new[0])


async def _send(
    url: str, tenants: list[str], *, stream: bool = False, model: str = "zero", concurrency: int = 16
) -> list[int]:
    body = orjson.dumps({"model": model, "prompt": "hi", "max_tokens": 4, "stream": stream})
    statuses: list[int] = []
    queue = list(tenants)

    async def worker(http: aiohttp.ClientSession) -> None:
        while queue:
            t = queue.pop()
            async with http.post(
                url + "/v1/completions", data=body, headers={"x-tenant-id": t, "Content-Type": "application/json"}
            ) as r:
                await r.read()
                statuses.append(r.status)

    async with aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=120)) as http:
        await asyncio.gather(*(worker(http) for _ in range(concurrency)))
    return statuses


def _rows_for(plane: Plane, n: int, since: float) -> list[dict[str, Any]]:
    def enough() -> list[dict[str, Any]] | None:
        got = [r for r in plane.rows() if r["ts"] >= since and r["path"] == "/v1/completions"]
        return got if len(got) >= n else None

    got = wait_until(enough, 30, f"{n} ledger rows")
    assert isinstance(got, list)
    return got


def _advance(plane: Plane, weight: int) -> dict[str, Any]:
    """The stage's gate decision (read-only), then `rollout advance --force` past a hold; the plane applies it."""
    gates = json.loads(plane.cli("rollout", "gates", "--json").stdout)
    done = plane.cli("rollout", "advance", "--force", "-m", f"to {weight} %")
    assert done.returncode == 0, done.stdout + done.stderr
    wait_until(lambda: plane.state()["weight"] == weight, 10, f"the plane at weight {weight}")
    return gates


@pytest.mark.parametrize("data_plane", PLANES)
def test_rollout_shadow_5_50_100_splits_within_3_points_with_a_row_per_request(data_plane, zero_pair, tmp_path):
    (_, old), (new_proc, new) = zero_pair
    port = free_port()
    cfg = tmp_path / "switchover.yaml"
    cfg.write_text(_config(data_plane, old, new, port))
    plane = Plane(cfg)
    url = f"http://127.0.0.1:{port}"
    try:
        started = plane.cli("rollout", "advance", "-m", "start shadow")
        assert started.returncode == 0, started.stdout + started.stderr
        since = time.time()
        assert set(asyncio.run(_send(url, [f"s-{i}" for i in range(300)], stream=True))) == {200}
        _rows_for(plane, 300, since)
        # mirrors end after their primary (Envoy's copies are measured by switchover's plane): wait for shadow rows
        wait_until(
            lambda: sum(f.read_bytes().count(b'"kind":"shadow"') for f in ledger_files(plane.run_dir)) >= 40,
            30,
            "40 shadow rows",
        )
        gates = json.loads(plane.cli("rollout", "gates", "--json").stdout)
        shadow_gate = next(g for g in gates["results"] if g["gate"] == "shadow_distribution")
        print(data_plane, "shadow gate:", shadow_gate["verdict"], shadow_gate.get("reason"), shadow_gate["samples"])
        # both sides on both planes: on Envoy old's answer is read by the plane's Lua filter as it streams (usage
        # asked for, finish_reason), new's by switchover's replay of the mirrored copy
        assert shadow_gate["verdict"] == "pass" and shadow_gate["samples"] >= 20, shadow_gate
        for weight in (5, 50, 100):
            _advance(plane, weight)
            since = time.time()
            tenants = [f"w{weight}-{i}" for i in range(PER_STAGE)]
            statuses = asyncio.run(_send(url, tenants))
            assert statuses.count(200) == PER_STAGE
            rows = _rows_for(plane, PER_STAGE, since)
            assert len(rows) == PER_STAGE and len({r["request_id"] for r in rows}) == PER_STAGE
            share = 100 * sum(r["arm"] == "new" for r in rows) / PER_STAGE
            print(f"{data_plane} weight {weight}: {share:.2f} % on new over {PER_STAGE} requests")
            assert abs(share - weight) <= 3
        # the kill switch: new goes away at 100 %, fallbacks trip it, and within 1 s new is out of the routes
        time.sleep(3.1)  # the kill switch's window (3 s) forgets the stage's 2,000 good requests
        stop(new_proc)
        latch = plane.run_dir / "killswitch.json"
        tripped = None
        for i in range(200):
            assert asyncio.run(_send(url, [f"k-{i}"], concurrency=1)) == [200]  # old answers every one
            if latch.exists() and json.loads(latch.read_text())["latched"]:
                tripped = time.monotonic()
                break
        assert tripped is not None, "the kill switch never tripped"

        def routed_away() -> bool:
            since_probe = time.time()
            asyncio.run(_send(url, ["probe"], concurrency=1))
            got = _rows_for(plane, 1, since_probe - 0.01)
            return got[-1]["route_reason"] == "kill_switch"

        wait_until(routed_away, 1.0, "a request routed by the kill switch within 1 s of the trip")
        elapsed = time.monotonic() - tripped
        print(f"{data_plane}: kill switch effective {elapsed * 1000:.0f} ms after the trip")
        assert elapsed < 1.0
    finally:
        stop(plane.proc)


@pytest.mark.parametrize("data_plane", PLANES)
def test_the_plane_streams_from_vllm_and_llama_server_with_a_row_each(data_plane, bed, tmp_path):
    port = free_port()
    cfg = tmp_path / "switchover.yaml"
    # the subject is streaming through the plane: no shadow load on the bed's single-slot engines
    cfg.write_text(
        _config(data_plane, bed.old_url, bed.new_url, port)
        .replace("weight: 0 ", "weight: 50 ")
        .replace("shadow: {percent: 20}", "shadow: {percent: 0}")
    )
    plane = Plane(cfg)
    try:
        since = time.time()
        statuses = asyncio.run(
            _send(f"http://127.0.0.1:{port}", [f"t{i}" for i in range(24)], stream=True, model=bed.model, concurrency=2)
        )
        assert statuses == [200] * 24
        rows = _rows_for(plane, 24, since)
        assert {r["arm"] for r in rows} == {"old", "new"} and all(r["stream"] for r in rows)
        # every one served by its own arm: llama-server closes its connection after each stream, and a pooled
        # connection reused in that window fell back to old through Envoy (before one request per connection)
        assert all(r["outcome"] == "ok" for r in rows), [
            (r["outcome"], r.get("fallback_reason"), r.get("error")) for r in rows if r["outcome"] != "ok"
        ]
        print(
            data_plane,
            "outcomes:",
            sorted((r["outcome"], r.get("fallback_reason")) for r in rows if r["outcome"] != "ok"),
        )
        # old's and new's own usage counts on both planes (on Envoy the Lua filter asked for usage and read it)
        assert all(r.get("tokens_source") == "usage" and r.get("completion_tokens") for r in rows)
        print(
            data_plane,
            "tokens:",
            sorted({(r["arm"], r.get("completion_tokens"), r.get("tokens_source")) for r in rows}),
        )
        tries = plane.run_dir / "envoy" / "tries.log"
        if tries.exists():  # Envoy's own account of each failed try (flags, transport failure, connection id)
            print(data_plane, "failed tries:", tries.read_text().strip() or "none")
    finally:
        stop(plane.proc)
