"""Entry gates on real engines: a rollout without a passing `switchover check` cannot enter shadow. Old = the bed's
vLLM CPU, new = the bed's llama-server; the check is a real one (probes only, bounded), the override a waiver
that lands in the audit log, and the shadow stage it opens mirrors real requests through the gateway."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import orjson
import pytest

from switchover.check.runner import CheckRun
from switchover.config import load_migration
from switchover.gateway.app import Gateway
from switchover.gateway.server import running
from switchover.rollout.controller import Rollout
from tests.engines.test_rollout_gateway import _shadows_done, _traffic

pytestmark = pytest.mark.engines

CONFIG = """\
old: {{url: "{old}", engine: vllm}}
new: {{url: "{new}", engine: llamacpp}}
gateway:
  weight: 0
  rollback: false
  run_dir: run
  reload_poll_s: 0.1
  shadow: {{percent: 100, max_concurrency: 4, max_tokens_clamp: 8}}
check:
  runs_dir: runs
  probe: {{budget_s: 20, skip: [n.parallel, max_tokens.omitted]}}   # the two slowest probes on 2 cores
  plan: {{enabled: false}}
  verify: {{enabled: false}}
  bench: {{enabled: false}}
  grace: {{enabled: false}}
  metrics: {{enabled: false}}
  live_model: {{enabled: false}}
  rollback: {{enabled: false}}
rollout:
  stages: [shadow, 20]
  window_s: 600
"""


async def test_no_passing_check_no_shadow_and_a_waiver_is_audited(
    bed: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("SWITCHOVER_ACTOR", "entry-test@ci")
    path = tmp_path / "switchover.yaml"
    path.write_text(CONFIG.format(old=bed.old_url, new=bed.new_url))
    m = load_migration(path)
    rollout = Rollout(m, path)

    report = rollout.gate_report()
    assert report.decision == "hold" and report.entry is not None
    res = rollout.advance(why="start shadow", force=True)
    assert res.action == "refused" and "no `switchover check` run" in res.message, res.message

    assert m.check is not None
    check, _ = await CheckRun(m, m.check, config_path=path).run()  # probes against both engines
    assert check.overall != "go"  # grace and bench did not run here: the check is incomplete (or a probe broke)
    res = rollout.advance(why="start shadow")
    assert res.action == "refused" and f"is {check.overall}" in res.message, res.message
    assert rollout.state().stage_name == "0%" and rollout.store.audit() == []

    gw = Gateway(load_migration(path), path)
    async with running(gw, port=0) as url:
        res = rollout.advance(why="start shadow", waivers={"rollout.entry_check": "probes reviewed by hand"})
        assert res.action == "advance" and res.state.stage == "shadow", res.message
        await _traffic(gw, url, bed.model, tenants=2)
        await _shadows_done(gw, 2)  # the shadow stage mirrors real answers from new
    audit = [orjson.loads(line) for line in rollout.store.audit_path.read_bytes().splitlines()]
    assert [(a["to_stage"], a["waived"]) for a in audit] == [
        ("shadow", {"rollout.entry_check": "probes reviewed by hand"})
    ]
