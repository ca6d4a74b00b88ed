"""The demo's gateway rollout step against the test bed: shadow is entered, traffic flows through the gateway,
the gates decide from the ledger, and every decision is in the audit log."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from switchover import demo
from switchover.cli.common import run
from switchover.config import load_migration
from switchover.testbed.processes import free_port
from tests.engines.conftest import Bed

pytestmark = [pytest.mark.engines, pytest.mark.timeout(600)]


def test_demo_rollout_enters_shadow_and_the_gates_decide_from_mirrored_traffic(bed: Bed, tmp_path: Path) -> None:
    cfg = tmp_path / "switchover.yaml"
    cfg.write_text(demo.demo_config(bed.old_url, bed.new_url, free_port()))
    said: list[str] = []
    summary = run(demo.gateway_rollout(load_migration(cfg), cfg, bed.model, said.append, requests=20))
    assert summary.steps[0].action == "advance" and summary.steps[0].stage == "shadow"
    assert summary.requests_ok == summary.requests_sent and 20 <= summary.requests_sent <= 60
    decided = summary.steps[1]
    # what the real engines' traffic decides is theirs; that the decision follows from its gates is ours
    if any(g["verdict"] == "fail" and g["hard"] for g in decided.gates):
        expected = "auto_rollback"
    elif decided.blockers or any(g["verdict"] != "pass" for g in decided.gates):
        expected = "hold"
    else:
        expected = "advance"
    assert decided.gates and decided.action == expected, (decided.action, decided.gates, decided.blockers)
    shadow_gate = next(g for g in decided.gates if g["gate"] == "shadow_distribution")
    assert shadow_gate["samples"] >= 15, "mirrors were dropped: the traffic must wait for shadow room"
    audit = [json.loads(line) for line in Path(summary.audit_log).read_text().splitlines()]
    assert audit[0]["to_stage"] == "shadow"
    if decided.action == "auto_rollback":
        assert audit[-1]["action"] == "auto_rollback" and "hard gate failed" in audit[-1]["why"]
