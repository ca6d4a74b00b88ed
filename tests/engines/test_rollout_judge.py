"""The canary judge on real traffic through switchover's gateway (issue 24).

A/A: the bed's llama-server behind both arms at 50 %; the judge, read after every batch of requests, never rolls
back. A/B: two fake engines (the scriptable one in switchover.testing), new answering its first token 40 ms later
than old (its configured delay): the judge rolls back on TTFT while today's gates still hold for samples, and the
audit line carries the decision and its request count. Loopback only; requests are bounded (max_tokens 8)."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import aiohttp
import orjson
import pytest

from switchover.config import load_migration
from switchover.gateway.app import Gateway
from switchover.gateway.server import running
from switchover.rollout.controller import Rollout
from switchover.testing.engine import FakeEngine
from tests.engines.test_rollout_gateway import TENANT_SEED

pytestmark = pytest.mark.engines

CONFIG = """\
old: {{url: "{old}", engine: llamacpp}}
new: {{url: "{new}", engine: llamacpp}}
gateway:
  weight: 0            # the rollout drives this line
  rollback: false
  run_dir: run
  tenant_seed_file: tenant.seed
  reload_poll_s: 0.1
  kill_switch: {{enabled: false}}
rollout:
  stages:
    - {{name: "50%", weight: 50, gates: [error_rate, fallback_ratio]}}
    - {{name: "100%", weight: 100}}
  window_s: 3600
  gates: {{min_samples: 100000}}   # today's gates hold for samples throughout: any rollback is the judge's
  entry: {{enabled: false}}
  judge: {{enabled: true}}
"""


async def _send(url: str, model: str, n: int, start: int) -> None:
    """n streamed completions over 40 tenants (20 of them on new at 50 %), one at a time."""
    body = {
        "model": model,
        "prompt": "The capital of France is",
        "max_tokens": 8,
        "stream": True,
        "temperature": 0,
        "stream_options": {"include_usage": True},
    }
    async with aiohttp.ClientSession() as http:
        for i in range(start, start + n):
            async with http.post(
                url + "/v1/completions",
                data=orjson.dumps(body),
                headers={"x-tenant-id": f"tenant-{i % 40}", "Content-Type": "application/json"},
                timeout=aiohttp.ClientTimeout(total=60),
            ) as r:
                assert r.status == 200, await r.read()
                await r.read()


async def _rows(gw: Gateway, n: int) -> None:
    for _ in range(400):
        if gw.ledger.written >= n:
            return
        await asyncio.sleep(0.05)  # a bounded poll
    raise AssertionError(f"{gw.ledger.written} ledger rows, {n} expected")


async def _reloaded(gw: Gateway, weight: float) -> None:
    for _ in range(200):
        if gw.live.gw.weight == weight:
            return
        await asyncio.sleep(0.02)  # a bounded poll
    raise AssertionError(f"gateway did not reload weight={weight}")


def _setup(tmp_path: Path, old: str, new: str) -> tuple[Path, Gateway, Rollout]:
    path = tmp_path / "switchover.yaml"
    path.write_text(CONFIG.format(old=old, new=new))
    (tmp_path / "tenant.seed").write_text(TENANT_SEED)
    return path, Gateway(load_migration(path), path), Rollout(load_migration(path), path)


async def _watch(gw: Gateway, url: str, rollout: Rollout, model: str, *, batches: int, size: int) -> list[Any]:
    """Send `batches` batches, judging after each (one `rollout watch` tick); stop at the first rollback."""
    ticks = []
    for b in range(batches):
        await _send(url, model, size, b * size)
        await _rows(gw, (b + 1) * size)
        res = rollout.check(auto_advance=False, why="watch")
        ticks.append(res)
        if res.action == "auto_rollback":
            break
    return ticks


async def test_aa_rollout_with_old_behind_both_arms_never_rolls_back(
    bed: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("SWITCHOVER_ACTOR", "engine-test@ci")
    _, gw, rollout = _setup(tmp_path, bed.new_url, bed.new_url)  # the bed's llama-server on both arms
    async with running(gw, port=0) as url:
        assert rollout.advance(why="start").state.stage == "50%"
        await _reloaded(gw, 50)
        ticks = await _watch(gw, url, rollout, bed.model, batches=6, size=40)
    assert len(ticks) == 6 and all(t.action in ("hold", "none") for t in ticks), [t.message for t in ticks]
    last = ticks[-1].report
    assert last is not None and last.judge is not None and last.judge.verdict != "regress"
    ttft = next(d for d in last.judge.decisions if d.metric == "ttft_ms" and d.test == "bulk_ratio")
    print("A/A judge after 240 requests:", [(d.metric, d.test, d.direction, d.requests) for d in last.judge.decisions])
    assert ttft.requests_new >= 80 and ttft.direction != "regress"
    assert [a.action for a in rollout.store.audit()] == ["advance"]


async def test_ab_rollout_with_a_slower_new_rolls_back_on_the_judge_with_its_request_count(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("SWITCHOVER_ACTOR", "engine-test@ci")
    old_engine, new_engine = FakeEngine("old", delay_ms=10), FakeEngine("new", delay_ms=50)
    async with old_engine.running() as old_url, new_engine.running() as new_url:
        _, gw, rollout = _setup(tmp_path, old_url, new_url)
        async with running(gw, port=0) as url:
            assert rollout.advance(why="start").state.stage == "50%"
            await _reloaded(gw, 50)
            ticks = await _watch(gw, url, rollout, old_engine.model, batches=8, size=20)
    assert ticks[-1].action == "auto_rollback", [t.message for t in ticks]
    report = ticks[-1].report
    assert report is not None and report.judge is not None
    assert {r.verdict for r in report.results} == {"hold"}  # today's gates alone would still hold
    (ttft,) = [d for d in report.judge.regressions if d.metric == "ttft_ms"]
    print("A/B rollback:", ttft.reason)
    assert ttft.effect is not None and ttft.effect > 1.0  # +40 ms on ~10 ms: more than double
    audit = rollout.store.audit()
    assert [a.action for a in audit] == ["advance", "auto_rollback"]
    line = audit[-1]
    assert "judge: ttft_ms bulk_ratio" in line.why and f"{ttft.requests_new} new requests" in line.why
    assert line.gates["judge ttft_ms bulk_ratio"] == f"fail ({ttft.requests} requests)"
