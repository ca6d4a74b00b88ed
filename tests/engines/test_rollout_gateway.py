"""A rollout on real engines through switchover's gateway: shadow → 20 %, then the new engine is stopped and
the rollout's gates roll back on their own. Old = the bed's vLLM CPU; new = a llama-server started (and
stopped) here, so the shared bed keeps running. Requests are bounded (tens, max_tokens 8)."""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import subprocess
import time
from pathlib import Path
from typing import Any

import aiohttp
import orjson
import pytest
import yaml

from switchover.config import load_migration
from switchover.gateway.app import Gateway
from switchover.gateway.server import running
from switchover.rollout.controller import Rollout
from switchover.testbed import processes
from switchover.testbed.layout import bed_models
from switchover.wire.readiness import check_ready

pytestmark = pytest.mark.engines

ENGINES_AND_GATEWAY = """\
# rollout on real engines (comments must survive the rollout's edits)
old: {{url: "{old}", engine: vllm}}
new: {{url: "{new}", engine: llamacpp}}
gateway:
  weight: 0            # the rollout drives this line
  rollback: false
  run_dir: run
  tenant_seed_file: tenant.seed   # the test's fixed seed (TENANT_SEED): the same buckets on every run
  reload_poll_s: 0.1
  kill_switch: {{enabled: false}}   # here the rollout's gates, not the gateway's latch, must act
  shadow: {{percent: 100, max_concurrency: 8, max_tokens_clamp: 8}}
"""
"""old = the bed's vLLM, new = a llama-server, the gateway in between (str.format fields: old, new)."""
TENANT_SEED = "4bc4d8c87a25e5580200ca1ced24d51682674776c7a13160c4dd5b50003f64d3\n"
"""tenant-0..39 at 20 %: 13 on new; at 50 %: 20 (10 of the first 20). Written beside the config before start."""

CONFIG = (
    ENGINES_AND_GATEWAY
    + """\
rollout:
  stages: [shadow, 20, 50]
  window_s: 600
  gates:
    min_samples: 10
    # vLLM CPU and llama.cpp differ in latency by design; the ratio gates judge latency from 20 % on
    shadow_metrics: [output_tokens, finish_reason, stop_hit, error_code]
  entry: {{enabled: false}}   # these judge the stage gates; entering needs evidence: test_rollout_entry.py
"""
)


def _start_llama(bed: Any, log: Path) -> tuple[subprocess.Popen[bytes], str]:
    model = bed_models(bed.layout)[bed.key]
    port = processes.free_port()
    url = f"http://127.0.0.1:{port}"
    with log.open("ab") as fh:
        proc = subprocess.Popen(
            processes.llama_command(bed.layout, model, port, threads=1),
            stdout=fh,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            start_new_session=True,
        )
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        assert proc.poll() is None, f"llama-server exited; see {log}"
        if asyncio.run(check_ready(url, model=model.served_name, max_ms=10000, connect_timeout_s=1)).ready:
            return proc, url
        time.sleep(0.3)  # a bounded poll
    raise AssertionError(f"llama-server not ready in 60 s; see {log}")


def _stop(proc: subprocess.Popen[bytes]) -> None:
    if proc.poll() is None:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGTERM)
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()


@pytest.fixture
def new_llama(bed: Any, tmp_path: Path):
    proc, url = _start_llama(bed, tmp_path / "llama.log")
    try:
        yield proc, url
    finally:
        _stop(proc)


async def _traffic(gw: Gateway, url: str, model: str, tenants: int, rounds: int = 1) -> None:
    body = {"model": model, "prompt": "The capital of France is", "max_tokens": 8, "stream": True, "temperature": 0}
    before = gw.ledger.written
    async with aiohttp.ClientSession() as http:
        for _ in range(rounds):
            for t in range(tenants):
                async with http.post(
                    url + "/v1/completions",
                    data=orjson.dumps(body),
                    headers={"x-tenant-id": f"tenant-{t}", "Content-Type": "application/json"},
                    timeout=aiohttp.ClientTimeout(total=60),
                ) as r:
                    assert r.status == 200, await r.read()
                    await r.read()
    for _ in range(400):  # rows wait for their shadow to finish
        if gw.ledger.written >= before + tenants * rounds:
            return
        await asyncio.sleep(0.05)  # a bounded poll
    raise AssertionError("ledger rows did not arrive")


async def _shadows_done(gw: Gateway, n: int) -> None:
    """Wait (on the ledger's counter, bounded) until n shadow rows are written: mirrors end after their primary."""
    for _ in range(600):
        if gw.ledger.shadows_written >= n:
            return
        await asyncio.sleep(0.05)  # a bounded poll
    raise AssertionError(f"{gw.ledger.shadows_written} shadow rows, {n} expected")


async def _shadow_traffic(gw: Gateway, url: str, model: str, n: int) -> None:
    """n requests one at a time, each mirror finished before the next: none dropped by the shadow bound."""
    start = gw.ledger.shadows_written
    for i in range(n):
        await _traffic(gw, url, model, tenants=1)
        await _shadows_done(gw, start + i + 1)


async def _reloaded(gw: Gateway, weight: float, rollback: bool) -> None:
    for _ in range(200):
        if gw.live.gw.weight == weight and gw.live.gw.rollback == rollback:
            return
        await asyncio.sleep(0.02)  # a bounded poll
    raise AssertionError(f"gateway did not reload weight={weight} rollback={rollback}")


async def test_shadow_to_20_then_automatic_rollback_when_new_stops(bed, new_llama, tmp_path, monkeypatch):
    monkeypatch.setenv("SWITCHOVER_ACTOR", "engine-test@ci")
    proc, new_url = new_llama
    path = tmp_path / "switchover.yaml"
    path.write_text(CONFIG.format(old=bed.old_url, new=new_url))
    (tmp_path / "tenant.seed").write_text(TENANT_SEED)
    gw = Gateway(load_migration(path), path)
    rollout = Rollout(load_migration(path), path)
    async with running(gw, port=0) as url:
        res = rollout.advance(why="start shadow")
        assert res.state.stage == "shadow", res.message

        await _shadow_traffic(gw, url, bed.model, 24)
        res = rollout.advance(why="shadow clean")
        assert res.action == "advance" and res.state.stage == "20%", res.message
        assert res.report is not None
        shadow = res.report.stats.shadow
        assert shadow is not None and shadow.metrics[0].n_new >= 10  # real mirrored answers were compared
        print("shadow comparison:", {m.metric: (m.verdict, m.n_old, m.n_new) for m in shadow.metrics})
        assert yaml.safe_load(path.read_text())["gateway"]["weight"] == 20
        assert "# the rollout drives this line" in path.read_text()
        await _reloaded(gw, 20, False)

        await _traffic(gw, url, bed.model, tenants=40)
        report = rollout.gate_report()
        print("gates at 20 % (new up):", report.summary(), report.stats.new.model_dump())
        assert report.stats.new.requests > 0 and report.stats.new.fallbacks == 0

        _stop(proc)  # the new engine goes away
        await _traffic(gw, url, bed.model, tenants=40)  # clients still get 200: new-arm requests fall back
        res = rollout.check(auto_advance=False, why="watch")
        print("after stopping new:", res.message)
        assert res.action == "auto_rollback" and res.state.stage == "shadow"
        assert res.report is not None and res.report.summary()["fallback_ratio"] == "fail"
        assert yaml.safe_load(path.read_text())["gateway"]["weight"] == 0
        await _reloaded(gw, 0, False)

        t = time.time()
        await _traffic(gw, url, bed.model, tenants=10)
        from switchover.ledger_files import read_requests

        after = [r for r in read_requests(gw.run_dir) if r.ts >= t]
        assert after and all(r.arm == "old" and r.outcome == "ok" for r in after)
    audit = rollout.store.audit()
    assert [a.action for a in audit] == ["advance", "advance", "auto_rollback"]
    assert all(a.who == "engine-test@ci" for a in audit)
