"""The rollout end to end on a synthetic ledger: gates decide, the gateway file follows, the audit log
records who/when/why."""

from __future__ import annotations

import time
from pathlib import Path

import orjson
import pytest
import yaml

from switchover.config import load_migration
from switchover.errors import BadInput
from switchover.rollout.controller import Rollout
from tests.rollout.builders import Clock, at_five_percent_by_cli, cli, traffic, write_ledger


def _gateway(config: Path) -> dict:
    return yaml.safe_load(config.read_text())["gateway"]


def test_a_full_rollout_with_hold_advance_auto_rollback_and_abandon(
    config_file: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("SWITCHOVER_ACTOR", "tester@box")
    clock = Clock(1000.0)
    ledger = config_file.parent / "gw"
    ledger.mkdir()
    r = Rollout(load_migration(config_file), config_file, clock=clock)

    res = r.advance(why="start shadow")
    assert res.action == "advance" and res.state.stage == "shadow" and _gateway(config_file)["weight"] == 0

    clock.t = 1010.0
    res = r.advance(why="too early")
    assert res.action == "hold" and "too few shadow samples" in res.message  # no evidence: hold, never pass

    write_ledger(ledger, traffic(1001.0, 400, new_share=0.0, shadow=True, seed=11))
    clock.t = 1100.0
    res = r.advance(why="shadow clean")
    assert res.action == "advance" and res.state.stage == "5%", res.message
    assert _gateway(config_file) | {} == _gateway(config_file) and _gateway(config_file)["weight"] == 5

    write_ledger(ledger, traffic(1101.0, 400, new_share=0.5, seed=12), index=1)
    clock.t = 1200.0
    res = r.advance(why="5% clean")
    assert res.action == "advance" and res.state.stage == "20%", res.message
    assert res.report is not None and res.report.summary()["error_rate"] == "pass"

    write_ledger(ledger, traffic(1201.0, 200, new_share=0.5, new_outcome="fallback_ok", seed=13), index=2)
    clock.t = 1300.0
    res = r.check(auto_advance=True, why="watch")
    assert res.action == "auto_rollback" and res.state.stage == "5%"
    assert "fallbacks" in res.message
    gw = _gateway(config_file)
    assert gw["weight"] == 5 and gw["rollback"] is False

    clock.t = 1301.0
    res = r.advance(why="retry at once")
    assert res.action == "hold" and "zero rollbacks" in res.message

    res = r.rollback(to="zero", why="support reports wrong answers")
    gw = _gateway(config_file)
    assert res.state.stage == "0%" and gw["weight"] == 0 and gw["rollback"] is True

    res = r.abandon(criteria=["hard_metrics", "narrow_gain"], why="TTFT x3 at 8k inputs")
    assert res.state.status.value == "abandoned"
    with pytest.raises(BadInput, match="abandoned"):
        r.advance(why="again")

    audit = [orjson.loads(line) for line in r.store.audit_path.read_bytes().splitlines()]
    assert [a["action"] for a in audit] == ["advance", "advance", "advance", "auto_rollback", "rollback", "abandon"]
    assert all(a["who"] == "tester@box" and a["ts"] > 0 and a["why"] for a in audit)
    assert audit[3]["gates"]["fallback_ratio"] == "fail"
    assert audit[-1]["criteria"] == ["hard_metrics", "narrow_gain"]
    assert "# percent of tenants on new" in config_file.read_text()  # comments survive every edit


def test_a_failed_hard_gate_on_advance_rolls_back_instead(config_file: Path) -> None:
    clock = Clock(1000.0)
    ledger = config_file.parent / "gw"
    r = Rollout(load_migration(config_file), config_file, clock=clock, ledger=ledger)
    write_ledger(ledger, [])
    r.advance(why="shadow")
    write_ledger(ledger, traffic(1001.0, 400, new_share=0.0, shadow=True, seed=21))
    clock.t = 1100.0
    r.advance(why="5%")
    write_ledger(ledger, traffic(1101.0, 100, new_share=1.0, new_outcome="error", seed=22), index=1)
    clock.t = 1200.0
    res = r.advance(why="hope")
    assert res.action == "auto_rollback" and res.state.stage == "shadow" and _gateway(config_file)["weight"] == 0


def test_on_fail_zero_sends_everything_back_to_old(config_file: Path) -> None:
    config_file.write_text(config_file.read_text().replace("  window_s: 3600\n", "  window_s: 3600\n  on_fail: zero\n"))
    clock = Clock(1000.0)
    ledger = config_file.parent / "gw"
    write_ledger(ledger, [])
    r = Rollout(load_migration(config_file), config_file, clock=clock)
    r.advance(why="shadow")
    r.advance(why="skip", force=True)  # a hold can be forced past; it is written in the audit log
    assert "forced past" in r.store.audit()[-1].why
    write_ledger(ledger, traffic(1001.0, 100, new_share=1.0, new_outcome="error"), index=1)
    clock.t = 1100.0
    res = r.check(auto_advance=False, why="watch")
    assert res.action == "auto_rollback" and res.state.stage == "0%"
    assert _gateway(config_file)["rollback"] is True


def test_cli_exit_codes_and_json(
    config_file: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(config_file.parent)
    (config_file.parent / "gw").mkdir()
    code, out, err = cli(capsys, "advance", "--json")
    assert code == 0, err
    assert orjson.loads(out)["state"]["stage"] == "shadow"
    code, out, _ = cli(capsys, "gates")
    assert code == 1 and "hold" in out
    code, _, err = cli(capsys, "rollback", "--to", "sideways", "-m", "x")
    assert code == 2 and "--to" in err and "Traceback" not in err
    code, out, _ = cli(capsys, "status", "--json")
    assert code == 0 and orjson.loads(out)["recent"][0]["action"] == "advance"
    code, _, err = cli(capsys, "status", "-c", "nope.yaml")
    assert code == 2 and "nope.yaml" in err


def test_cli_watch_rolls_back_and_exits_1(
    config_file: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(config_file.parent)
    ledger = at_five_percent_by_cli(config_file, capsys)
    write_ledger(ledger, traffic(time.time(), 60, new_share=1.0, new_outcome="error"), index=1)
    code, out, _ = cli(capsys, "watch", "--interval", "0.01", "--max-checks", "3")
    assert code == 1 and "rolled back 5% → shadow" in out
    assert yaml.safe_load(config_file.read_text())["gateway"]["weight"] == 0
    code, out, _ = cli(capsys, "watch", "--json", "--interval", "0.01", "--max-checks", "2")
    checks = orjson.loads(out)  # one JSON list of every check, kept only because --json asked for it
    assert code == 0 and [c["state"]["stage"] for c in checks] == ["shadow", "shadow"]
