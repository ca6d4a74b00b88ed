"""The rollback window on real engines through switchover's gateway: shadow → 50 % → 100 % → holding. A window
closes on time (audit `window_end`), then the new engine fails inside the crash window and one command
(`switchover rollout rollback`) sends everything back to old; a second rollout runs its windows to the end
(`holding_end`). Old = the bed's vLLM CPU; new = a llama-server started here. Bounded: tens of requests."""

from __future__ import annotations

import asyncio
import contextlib
import subprocess
import time
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from switchover.cli.app import invoke
from switchover.config import load_migration
from switchover.drill import run_drill
from switchover.gateway.app import Gateway
from switchover.gateway.server import running
from switchover.ledger_files import read_requests
from switchover.rollout.controller import Rollout
from switchover.runs import RunDir
from tests.engines.test_rollout_gateway import (
    ENGINES_AND_GATEWAY,
    TENANT_SEED,
    _reloaded,
    _shadow_traffic,
    _start_llama,
    _stop,
    _traffic,
)

pytestmark = pytest.mark.engines


@pytest.fixture
def llama(bed: Any, tmp_path: Path) -> Iterator[tuple[subprocess.Popen[bytes], str]]:
    """A llama-server as the new engine, started for the test and stopped after it."""
    proc, url = _start_llama(bed, tmp_path / "llama.log")
    try:
        yield proc, url
    finally:
        _stop(proc)


CONFIG = (
    ENGINES_AND_GATEWAY
    + """\
rollout:
  stages: [shadow, 50, 100]
  window_s: 600
  gates:
    min_samples: 10
    shadow_metrics: [output_tokens, finish_reason, stop_hit, error_code]
    max_ttft_p99_ratio: 100    # vLLM CPU and llama.cpp differ in latency by design
    max_tpot_p99_ratio: 100
  holding:
    windows:
      crash: {{duration_s: {crash}, gates: [error_rate, fallback_ratio]}}
      latency: {{duration_s: 0}}
      format: {{duration_s: {fmt}, gates: [output_length_shift]}}
      quality: {{duration_s: 0}}
      business: {{duration_s: 0}}
    old: {{interval_s: 1, max_ms: 10000}}
    drill: {{runs: runs}}
  entry: {{enabled: false}}   # these judge the stage gates; entering needs evidence: test_rollout_entry.py
"""
)


async def _drill_old(tmp: Path, old_url: str) -> None:
    """A real drill of the side-by-side case: nothing to stop or start, time to the first good answer on old."""
    res = await run_drill(stop_cmd="true", start_cmd="true", url=old_url, ready_timeout_s=60, poll_s=0.2, max_ms=10000)
    assert res.ok, res.reason
    RunDir.create(tmp / "runs", "drill").write_json("drill", res)


@contextlib.asynccontextmanager
async def _holding(
    tmp: Path, bed: Any, new_url: str, *, crash: float, fmt: float
) -> AsyncIterator[tuple[Path, Gateway, Rollout, str]]:
    """A drilled rollout taken shadow → 50 % → 100 % through a running gateway, now holding; yields the config
    path, the gateway, the rollout and the gateway's URL."""
    path = tmp / "switchover.yaml"
    path.write_text(CONFIG.format(old=bed.old_url, new=new_url, crash=crash, fmt=fmt))
    (tmp / "tenant.seed").write_text(TENANT_SEED)
    await _drill_old(tmp, bed.old_url)
    gw = Gateway(load_migration(path), path)
    rollout = Rollout(load_migration(path), path)
    async with running(gw, port=0) as url:
        assert rollout.advance(why="start shadow").state.stage == "shadow"
        await _shadow_traffic(gw, url, bed.model, 16)
        res = rollout.advance(why="shadow clean")
        assert res.state.stage == "50%", res.message
        await _reloaded(gw, 50, False)
        await _traffic(gw, url, bed.model, tenants=40)
        res = rollout.advance(why="50% clean")
        assert res.action == "advance" and res.state.status.value == "holding", res.message
        assert [t.action for t in res.transitions] == ["advance", "holding_start"]
        await _reloaded(gw, 100, False)
        assert yaml.safe_load(path.read_text())["gateway"]["weight"] == 100
        yield path, gw, rollout, url


async def test_holding_then_a_failure_in_the_window_rolls_back_with_one_command(
    bed, llama, tmp_path, monkeypatch, capsys
) -> None:
    monkeypatch.setenv("SWITCHOVER_ACTOR", "engine-test@ci")
    proc, new_url = llama
    async with _holding(tmp_path, bed, new_url, crash=3600, fmt=2) as (path, gw, rollout, url):
        hr = rollout.gate_report().holding
        assert hr is not None
        pre = {p.name: p.status for p in hr.prerequisites}
        print("prerequisites:", pre)
        assert pre["route"] == "ok" and pre["drill"] == "ok" and pre["old_ready"] == "ok"
        assert pre["monitoring"] == "ok"  # vLLM's /metrics on old really answered

        await _traffic(gw, url, bed.model, tenants=20)
        await asyncio.sleep(2.1)  # the scenario: wall-clock time passes until the format window (2 s) is due
        res = rollout.check(auto_advance=False, why="watch")
        print("holding after 2 s:", res.message)
        assert [t.window for t in res.transitions] == ["format"], res.message
        assert res.state.status.value == "holding"

        _stop(proc)  # the new engine fails inside the crash window
        await _traffic(gw, url, bed.model, tenants=20)  # clients still get 200: every request falls back to old
        report = rollout.gate_report()
        assert report.holding is not None and report.holding.decision == "rollback", report.holding.reason
        print("the failure:", report.holding.reason)

        capsys.readouterr()
        code = invoke(["rollout", "rollback", "-c", str(path), "-m", "new engine down inside the window"])
        out = capsys.readouterr().out
        assert code == 0, out
        assert "rolled back 100% → 0%" in out
        gw_cfg = yaml.safe_load(path.read_text())["gateway"]
        assert gw_cfg["weight"] == 0 and gw_cfg["rollback"] is True
        await _reloaded(gw, 0, True)
        t = time.time()
        await _traffic(gw, url, bed.model, tenants=10)
        after = [r for r in read_requests(gw.run_dir) if r.ts >= t]
        assert after and all(r.arm == "old" and r.outcome == "ok" for r in after)
    audit = rollout.store.audit()
    assert [a.action for a in audit] == ["advance", "advance", "advance", "holding_start", "window_end", "rollback"]
    assert audit[4].window == "format" and audit[-1].who == "engine-test@ci"


async def test_a_quiet_holding_window_ends_and_the_end_is_in_the_audit_log(bed, llama, tmp_path, monkeypatch) -> None:
    monkeypatch.setenv("SWITCHOVER_ACTOR", "engine-test@ci")
    _, new_url = llama
    async with _holding(tmp_path, bed, new_url, crash=3, fmt=2) as (_, gw, rollout, url):
        await _traffic(gw, url, bed.model, tenants=20)
        await asyncio.sleep(3.1)  # the scenario: wall-clock time passes until both windows (2 s, 3 s) are over
        res = rollout.check(auto_advance=False, why="windows over, new healthy")
        print("end:", res.message, res.report.holding.reason if res.report and res.report.holding else "")
        assert res.action == "holding_end" and res.state.status.value == "complete", res.message
    audit = [a.action for a in rollout.store.audit()]
    assert audit[-3:] == ["window_end", "window_end", "holding_end"]
