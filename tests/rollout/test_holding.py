"""The rollback window after 100 %: per-failure-type windows, old's readiness as a gate, prerequisites, the drill,
and `rollout rollback` inside the window. Pure judges table-tested; the controller on a synthetic ledger."""

from __future__ import annotations

from pathlib import Path

import orjson
import pytest
import yaml

from switchover.config import load_migration
from switchover.config.rollout import GateName, RolloutSettings
from switchover.config.rollout_holding import DrillRequirement, FailureType, HoldingSettings
from switchover.evidence.drill import DrillResult
from switchover.rollout import rollback_ready
from switchover.rollout.controller import Rollout
from switchover.rollout.custom_gates import CustomGateResult
from switchover.rollout.holding import (
    HoldingState,
    OldArmView,
    ReadyRecord,
    WindowState,
    check_due,
    decide_holding,
    judge_drill,
    judge_old,
    judge_window,
)
from switchover.rollout.verdicts import GateResult
from switchover.wire.readiness import Readiness, ReadyState
from tests.rollout.builders import Clock, cli, traffic, write_ledger

OLD = "http://127.0.0.1:18001"


def _rec(ts: float, ready: bool = True) -> ReadyRecord:
    return ReadyRecord(ts=ts, url=OLD, ready=ready, state="ready" if ready else "refused", reason="r")


@pytest.mark.parametrize(
    ("records", "now", "verdict", "at_risk"),
    [
        ([], 100.0, "hold", True),  # never checked
        ([_rec(90)], 100.0, "pass", False),
        ([_rec(90), _rec(95, ready=False)], 100.0, "fail", True),  # the latest counts
        ([_rec(95, ready=False), _rec(99)], 100.0, "pass", False),
        ([_rec(10)], 100.0, "hold", True),  # stale after 60 s
    ],
)
def test_old_readiness_is_a_gate_that_puts_the_window_at_risk(records, now, verdict, at_risk) -> None:
    view = judge_old(OLD, records, now, stale_after_s=60)
    assert (view.verdict, view.at_risk) == (verdict, at_risk)


def test_the_readiness_check_of_old_is_due_on_its_interval() -> None:
    assert check_due(None, 0.0, 300) and not check_due(_rec(100), 399, 300) and check_due(_rec(100), 400, 300)


def _gate(verdict: str, hard: bool = True, gate: GateName = GateName.ERROR_RATE) -> GateResult:
    return GateResult(gate=gate, verdict=verdict, hard=hard, threshold=0.02, samples=50, reason=verdict)


READY = OldArmView(url=OLD, verdict="pass", at_risk=False, reason="ready")
DOWN = OldArmView(url=OLD, verdict="fail", at_risk=True, reason="old cannot serve")


@pytest.mark.parametrize(
    ("ws", "gates", "old", "now", "status", "failed"),
    [
        (WindowState(ends_at=100, closed_at=50), [_gate("fail")], READY, 200, "closed", []),
        (WindowState(ends_at=100), [_gate("fail")], READY, 50, "open", ["error_rate"]),
        (WindowState(ends_at=100), [_gate("fail", hard=False)], READY, 150, "extended", []),  # soft: holds
        (WindowState(ends_at=100), [_gate("pass")], READY, 50, "open", []),
        (WindowState(ends_at=100), [_gate("pass")], READY, 100, "closing", []),
        (WindowState(ends_at=100), [_gate("hold")], READY, 150, "extended", []),  # too few samples at the end
        (WindowState(ends_at=100), [_gate("pass")], DOWN, 150, "extended", []),  # closes only while old can serve
        (WindowState(ends_at=100), [], READY, 100, "closing", []),  # unwatched: on time alone
    ],
)
def test_a_window_closes_on_time_only_when_its_gates_pass_and_old_is_ready(ws, gates, old, now, status, failed):
    w = judge_window(FailureType.FORMAT, 100, ws, gates, [], old, now)
    assert w.status == status and w.failed == failed
    assert w.unwatched == (not gates)


def test_a_failing_custom_gate_in_a_window_is_a_rollback() -> None:
    c = CustomGateResult(name="json_ok", kind="builtin", verdict="fail", hard=True, reason="bad JSON")
    w = judge_window(FailureType.FORMAT, 100, WindowState(ends_at=100), [], [c], READY, 10)
    assert w.failed == ["json_ok"]


def _state(*types: FailureType) -> HoldingState:
    return HoldingState(started_at=0, windows={t: WindowState(ends_at=100) for t in types})


def test_holding_decides_rollback_only_while_old_can_serve() -> None:
    st = _state(FailureType.CRASH)
    failing = [judge_window(FailureType.CRASH, 100, WindowState(ends_at=100), [_gate("fail")], [], READY, 10)]
    assert decide_holding(st, failing, READY, []).decision == "rollback"
    blocked = decide_holding(st, failing, DOWN, [])
    assert blocked.decision == "rollback_blocked" and "cannot take the traffic back" in blocked.reason
    assert any("at risk" in w for w in blocked.warnings)


def test_holding_ends_when_every_window_has_closed_and_holds_otherwise() -> None:
    st = _state(FailureType.CRASH, FailureType.QUALITY)
    closing = judge_window(FailureType.CRASH, 100, WindowState(ends_at=100), [_gate("pass")], [], READY, 100)
    closed = judge_window(FailureType.QUALITY, 100, WindowState(ends_at=50, closed_at=60), [], [], READY, 100)
    still = judge_window(FailureType.QUALITY, 300, WindowState(ends_at=300), [], [], READY, 100)
    assert decide_holding(st, [closing, closed], READY, []).decision == "end"
    held = decide_holding(st, [closing, still], READY, [])
    assert held.decision == "hold" and held.closing == [FailureType.CRASH]
    assert any("no gate watches quality" in w for w in held.warnings)


def _drill(ok: bool = True, recovery: float | None = 2.0, started: float = 1000.0) -> DrillResult:
    return DrillResult(
        url=OLD, stop_command="s", start_command="t", started_wall=started, ok=ok, recovery_s=recovery, reason="why"
    )


@pytest.mark.parametrize(
    ("found", "req", "status"),
    [
        (None, DrillRequirement(), "missing"),
        (("d", _drill()), DrillRequirement(), "ok"),
        (("d", _drill(started=0)), DrillRequirement(max_age_s=100), "missing"),  # too old
        (("d", _drill(ok=False, recovery=None)), DrillRequirement(), "failed"),
        (("d", _drill(recovery=200)), DrillRequirement(max_recovery_s=120), "failed"),
    ],
)
def test_the_last_drill_is_a_rollback_prerequisite(found, req, status) -> None:
    p = judge_drill(found, 1100.0, req)
    assert p.status == status and p.blocks == (status != "ok")


def test_windows_merge_with_the_defaults_and_unknown_gates_are_refused() -> None:
    h = HoldingSettings.model_validate({"windows": {"format": {"duration_s": 7200}, "business": {"duration_s": 0}}})
    assert h.windows[FailureType.FORMAT].duration_s == 7200
    assert h.windows[FailureType.FORMAT].gates == ["output_length_shift"]  # default gates kept
    assert FailureType.BUSINESS not in h.windows  # switched off
    with pytest.raises(ValueError, match="unknown gate 'nope'"):
        RolloutSettings.model_validate({"holding": {"windows": {"crash": {"gates": ["nope"]}}}})
    with pytest.raises(ValueError, match="shadow_distribution needs shadow"):
        RolloutSettings.model_validate({"holding": {"windows": {"crash": {"gates": ["shadow_distribution"]}}}})


# --- the controller on a synthetic ledger ------------------------------------------------------------------

CONFIG = """\
old: {url: "http://127.0.0.1:18001", engine: vllm}
new: {url: "http://127.0.0.1:18002", engine: llamacpp}
gateway:
  weight: 0
  rollback: false
  run_dir: gw
rollout:
  stages: [5, 100]
  window_s: 3600
  gates: {min_samples: 30}
  holding:
    windows:
      crash: {duration_s: 100, gates: [error_rate]}
      latency: {duration_s: 300, gates: [ttft_p99_ratio]}
      format: {duration_s: 0}
      quality: {duration_s: 200}
      business: {duration_s: 0}
    old: {interval_s: 50}
    prerequisites: {old_launch: [old-launch.sh], old_weights: [weights], monitoring: true}
  entry: {enabled: false}   # these tests judge holding; the entry evidence is tested in test_entry*.py
"""


class FakeOld:
    """A readiness check of old that answers as told, and counts its calls."""

    def __init__(self) -> None:
        self.ready = True
        self.calls = 0

    def __call__(self, url: str, model: str | None, max_ms: float, **engine: str | None) -> Readiness:
        self.calls += 1
        state = ReadyState.READY if self.ready else ReadyState.REFUSED
        return Readiness(url=url, state=state, ready=self.ready, reason="fake", max_ms=max_ms)


@pytest.fixture
def bed(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> tuple[Path, Clock, FakeOld]:
    monkeypatch.setenv("SWITCHOVER_ACTOR", "holder@box")
    cfg = tmp_path / "switchover.yaml"
    cfg.write_text(CONFIG)
    (tmp_path / "old-launch.sh").write_text("vllm serve ...\n")
    (tmp_path / "weights").mkdir()
    (tmp_path / "weights" / "model.safetensors").write_bytes(b"x")
    drill = tmp_path / "runs" / "20250101T000000Z-drill"
    drill.mkdir(parents=True)
    drill.joinpath("drill.json").write_bytes(_drill(started=900.0).model_dump_json().encode())
    return cfg, Clock(1000.0), FakeOld()


def _rollout(cfg: Path, clock: Clock, old: FakeOld) -> Rollout:
    return Rollout(load_migration(cfg), cfg, clock=clock, ready=old, metrics=lambda url: None)


def _to_holding(cfg: Path, clock: Clock, old: FakeOld) -> Rollout:
    r = _rollout(cfg, clock, old)
    assert r.advance(why="start").state.stage == "5%"
    write_ledger(cfg.parent / "gw", traffic(1001.0, 400, new_share=0.5, seed=3))
    clock.t = 1100.0
    res = r.advance(why="5% clean")
    assert res.action == "advance" and res.state.status.value == "holding", res.message
    assert [t.action for t in res.transitions] == ["advance", "holding_start"]
    return r


def test_entering_100_percent_opens_the_window_with_a_baseline_and_the_windows_close_in_turn(bed) -> None:
    cfg, clock, old = bed
    r = _to_holding(cfg, clock, old)
    base = orjson.loads((r.store.folder / "baseline.json").read_bytes())
    assert base["ttft_n"] >= 30 and base["output_tokens"]["other"]  # old's answers before 100 %
    state = r.state()
    assert state.holding is not None and {k.value for k in state.holding.windows} == {"crash", "latency", "quality"}

    write_ledger(cfg.parent / "gw", traffic(1101.0, 300, new_share=1.0, seed=4), index=1)  # new only, healthy
    clock.t = 1150.0
    res = r.check(auto_advance=False, why="watch")
    assert res.action == "hold" and res.report is not None and res.report.holding is not None
    hr = res.report.holding
    lat = next(w for w in hr.windows if w.failure_type == FailureType.LATENCY)
    assert lat.gates[0].verdict == "pass" and any("baseline" in n for n in res.report.stats.notes)

    clock.t = 1210.0  # crash window (100 s) is due
    res = r.check(auto_advance=False, why="watch")
    assert [t.window for t in res.transitions] == ["crash"] and res.state.status.value == "holding"
    clock.t = 1320.0  # quality (200 s, unwatched) is due
    res = r.check(auto_advance=False, why="watch")
    assert [t.window for t in res.transitions] == ["quality"]
    clock.t = 1420.0  # latency (300 s): the last one
    res = r.check(auto_advance=False, why="watch")
    assert res.action == "holding_end" and res.state.status.value == "complete"
    audit = [t.action for t in r.store.audit()]
    assert audit == ["advance", "advance", "holding_start", "window_end", "window_end", "window_end", "holding_end"]
    assert all(t.who == "holder@box" for t in r.store.audit())
    assert (r.store.folder / "holding.json").exists()  # for check / report


def test_a_failure_inside_the_window_rolls_everything_back_to_old(bed) -> None:
    cfg, clock, old = bed
    r = _to_holding(cfg, clock, old)
    write_ledger(cfg.parent / "gw", traffic(1101.0, 200, new_share=1.0, new_outcome="error", seed=5), index=1)
    clock.t = 1150.0
    res = r.check(auto_advance=False, why="watch")
    assert res.action == "auto_rollback" and res.state.stage == "0%", res.message
    gw = yaml.safe_load(cfg.read_text())["gateway"]
    assert gw["weight"] == 0 and gw["rollback"] is True  # holding.on_fail: zero
    assert r.store.audit()[-1].action == "auto_rollback" and "crash" in r.store.audit()[-1].why


def test_a_failure_while_old_cannot_serve_is_a_blocked_rollback_not_an_outage(bed) -> None:
    cfg, clock, old = bed
    r = _to_holding(cfg, clock, old)
    write_ledger(cfg.parent / "gw", traffic(1101.0, 200, new_share=1.0, new_outcome="error", seed=5), index=1)
    old.ready = False
    clock.t = 1160.0  # the scheduled check (every 50 s) is due and fails
    res = r.check(auto_advance=False, why="watch")
    assert res.action == "rollback_blocked" and "old cannot" in res.message
    assert yaml.safe_load(cfg.read_text())["gateway"]["weight"] == 100  # nothing changed


def test_rollout_rollback_in_the_window_is_one_command_and_checks_old_first(bed, capsys, monkeypatch) -> None:
    cfg, clock, old = bed
    _to_holding(cfg, clock, old)
    monkeypatch.setattr(rollback_ready, "ready_check", old)  # the CLI's own Rollout uses the module's checker
    old.ready = False
    code, out, _ = cli(capsys, "rollback", "-c", str(cfg), "-m", "support: wrong answers")
    assert code == 1 and "refused: old cannot serve" in out
    assert yaml.safe_load(cfg.read_text())["gateway"]["weight"] == 100  # refused: nothing changed
    old.ready = True
    code, out, _ = cli(capsys, "rollback", "-c", str(cfg), "-m", "support: wrong answers", "--json")
    assert code == 0, out
    data = orjson.loads(out)
    assert data["state"]["stage"] == "0%" and data["transition"]["to_weight"] == 0  # holding.on_fail: zero
    gw = yaml.safe_load(cfg.read_text())["gateway"]
    assert gw["weight"] == 0 and gw["rollback"] is True


def test_a_forced_rollback_onto_an_unready_old_is_recorded(bed) -> None:
    cfg, clock, old = bed
    r = _to_holding(cfg, clock, old)
    old.ready = False
    res = r.rollback(why="new is worse", force=True)
    assert res.action == "rollback" and "forced: old was not ready" in r.store.audit()[-1].why


def test_entering_holding_is_blocked_without_a_drill_or_a_writable_route(bed) -> None:
    cfg, clock, old = bed
    for d in (cfg.parent / "runs").iterdir():
        (d / "drill.json").unlink()
    r = _rollout(cfg, clock, old)
    r.advance(why="start")
    write_ledger(cfg.parent / "gw", traffic(1001.0, 400, new_share=0.5, seed=3))
    clock.t = 1100.0
    res = r.advance(why="5% clean")
    assert res.action == "hold" and "rollback prerequisite drill missing" in res.message
    res = r.advance(why="no drill yet", force=True)  # forced: recorded
    assert res.state.status.value == "holding" and "forced past" in r.store.audit()[-2].why


def test_old_is_checked_on_its_schedule_not_on_every_tick(bed) -> None:
    cfg, clock, old = bed
    r = _to_holding(cfg, clock, old)
    calls = old.calls
    clock.t = 1110.0
    r.check(auto_advance=False, why="t")
    clock.t = 1120.0
    r.check(auto_advance=False, why="t")
    assert old.calls == calls  # checked at 1100 on entry; the next is due at 1150
    clock.t = 1165.0
    r.check(auto_advance=False, why="t")
    assert old.calls == calls + 1


def test_rollout_holding_and_prerequisites_commands(bed, capsys, monkeypatch) -> None:
    cfg, clock, old = bed
    monkeypatch.setattr(rollback_ready, "ready_check", old)
    monkeypatch.setattr(rollback_ready, "metrics_check", lambda url: "connection refused")
    code, out, _ = cli(capsys, "holding", "-c", str(cfg))
    assert code == 0 and "no rollback window yet" in out  # before 100 %: a state, not bad input
    code, out, _ = cli(capsys, "prerequisites", "-c", str(cfg), "--json")
    pre = {p["name"]: p["status"] for p in orjson.loads(out)}
    assert code == 1 and pre == {
        "config": "ok",
        "weights": "ok",
        "route": "ok",
        "monitoring": "failed",
        "drill": "missing",
        "old_ready": "ok",
    }  # the drill is 'old' by the wall clock
    _to_holding(cfg, clock, old)
    code, out, _ = cli(capsys, "holding", "-c", str(cfg), "--json", "--check-old")
    report = orjson.loads(out)
    assert {w["failure_type"] for w in report["windows"]} == {"crash", "latency", "quality"}
    assert report["old"]["verdict"] == "pass" and code == 0


def test_rollback_evidence_for_check_and_report(bed, monkeypatch) -> None:
    from switchover.rollout.rollback_view import rollback_evidence

    cfg, clock, old = bed
    monkeypatch.setattr(rollback_ready, "ready_check", old)
    monkeypatch.setattr(rollback_ready, "metrics_check", lambda url: None)
    ev = rollback_evidence(load_migration(cfg), cfg)
    assert ev.drill is not None and ev.drill.recovery_s == 2.0 and ev.drill_file and ev.holding is None
    assert [p.name for p in ev.blocking] == ["drill"]  # 900 s after the epoch: older than 30 days by the wall clock
    r = _to_holding(cfg, clock, old)
    r.check(auto_advance=False, why="t")  # writes holding.json
    ev = rollback_evidence(load_migration(cfg), cfg, check_old=False)
    assert ev.rollout_status == "holding" and ev.holding is not None and ev.holding.windows


def test_a_baseline_file_with_a_nan_tail_is_no_baseline_never_a_pass(bed) -> None:
    cfg, clock, old = bed
    r = _to_holding(cfg, clock, old)
    path = r.store.folder / "baseline.json"
    path.write_bytes(path.read_bytes().replace(b'"ttft_p99_ms": ', b'"ttft_p99_ms": NaN, "x": ', 1))
    assert r.holding.baseline() is None  # refused: new/NaN compares false, so the ratio gate would pass


def test_a_drill_json_behind_a_device_is_not_a_drill_and_not_read_without_end(tmp_path: Path) -> None:
    (tmp_path / "d1").mkdir()
    (tmp_path / "d1" / "drill.json").symlink_to("/dev/zero")
    (tmp_path / "d2").mkdir()
    (tmp_path / "d2" / "drill.json").mkdir()
    assert rollback_ready.latest_drill(tmp_path) is None
