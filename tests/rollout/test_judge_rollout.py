"""The judge in a rollout: the `judge:` block, how a decisive judge changes a stage's decision, the audit line of
a judge rollback with its request count, early advance on 'no regression', and `rollout status` per metric."""

from __future__ import annotations

from pathlib import Path

import orjson
import pytest
from pydantic import ValidationError

from switchover.config import load_migration
from switchover.config.rollout import GateName, RolloutSettings
from switchover.config.rollout_judge import JudgeConfig
from switchover.errors import BadInput
from switchover.rollout.controller import Rollout
from switchover.rollout.custom_gates import CustomGateResult
from switchover.rollout.judge.panel import JudgeReport
from switchover.rollout.judge.stage import with_judge
from switchover.rollout.verdicts import GateResult
from tests.rollout.builders import Clock, cli, row, write_ledger

CONFIG = """\
old: {{url: "http://127.0.0.1:18001", engine: vllm}}
new: {{url: "http://127.0.0.1:18002", engine: llamacpp}}
gateway:
  weight: 0
  rollback: false
  run_dir: gw
rollout:
  stages:
    - {{name: "5%", weight: 5, gates: [error_rate, fallback_ratio]}}
    - {{name: "20%", weight: 20}}
  window_s: 100000
  gates: {{min_samples: {min_samples}}}
  entry: {{enabled: false}}
  judge: {{enabled: {enabled}, metrics: [error, fallback], rate_floor: 0.0025}}
"""


def _gate(gate: GateName, verdict: str) -> GateResult:
    return GateResult(gate=gate, verdict=verdict, hard=True, threshold=0.0, samples=1, reason="r")  # type: ignore


def _report(verdict: str, metric: str = "error", n: int = 100) -> JudgeReport:
    from switchover.rollout.judge.models import Decision

    direction = {"regress": "regress", "ok": "ok", "undecided": "undecided"}[verdict]
    d = Decision(
        test="rate_difference",
        metric=metric,
        direction=direction,
        unit="difference",  # type: ignore
        floor=0.0025,
        requests_old=n,
        requests_new=n,
        alpha=0.01,
        reason="why",
    )
    return JudgeReport(verdict=verdict, decisions=[d])  # type: ignore[arg-type]


@pytest.mark.parametrize(
    "gates_say, judge, hard, results, custom, blockers, expected",
    [
        ("hold", "regress", True, [("error_rate", "hold")], [], [], "rollback"),
        ("hold", "regress", False, [("error_rate", "hold")], [], [], "hold"),
        ("advance", "regress", True, [("error_rate", "pass")], [], [], "rollback"),
        ("hold", "ok", True, [("error_rate", "hold")], [], [], "advance"),  # ends the stage early
        ("hold", "ok", True, [("ttft_p99_ratio", "hold")], [], [], "hold"),  # TTFT not judged: no vouching
        ("hold", "ok", True, [("shadow_distribution", "hold")], [], [], "hold"),
        ("hold", "ok", True, [("error_rate", "fail")], [], [], "hold"),  # a failed soft gate stays a hold
        ("hold", "ok", True, [("error_rate", "hold")], ["hold"], [], "hold"),  # a custom gate short of pass
        ("hold", "ok", True, [("error_rate", "hold")], [], ["min_duration_s"], "hold"),
        ("hold", "undecided", True, [("error_rate", "hold")], [], [], "hold"),
        ("rollback", "ok", True, [("error_rate", "fail")], [], [], "rollback"),
    ],
)
def test_with_judge_changes_the_gates_decision_only_when_decisive(
    gates_say: str,
    judge: str,
    hard: bool,
    results: list[tuple[str, str]],
    custom: list[str],
    blockers: list[str],
    expected: str,
) -> None:
    cfg = JudgeConfig(enabled=True, hard=hard)
    res = [_gate(GateName(g), v) for g, v in results]
    cus = [CustomGateResult(name="c", kind="ledger", verdict=v, hard=True, reason="r") for v in custom]  # type: ignore[arg-type]
    got = with_judge(gates_say, _report(judge), cfg, results=res, custom=cus, blockers=blockers)  # type: ignore
    assert got == expected


def test_with_judge_off_leaves_the_decision_alone() -> None:
    assert with_judge("hold", None, JudgeConfig(), results=[], custom=[], blockers=[]) == "hold"


def test_judge_block_is_off_by_default_and_rejects_unknown_keys_and_metrics() -> None:
    assert RolloutSettings().judge.enabled is False
    assert RolloutSettings.model_validate({"judge": {"enabled": True, "alpha": 0.05}}).judge.alpha == 0.05
    for bad in ({"alhpa": 0.1}, {"metrics": ["latency"]}, {"alpha": 0.9}, {"shift_floor": 0}):
        with pytest.raises(ValidationError):
            RolloutSettings.model_validate({"judge": bad})


def test_a_bad_judge_value_in_the_file_is_bad_input_naming_the_field(tmp_path: Path) -> None:
    p = tmp_path / "switchover.yaml"
    p.write_text(CONFIG.format(min_samples=10, enabled="maybe"))
    with pytest.raises(BadInput, match="judge"):
        load_migration(p)


def _at_five(tmp_path: Path, *, min_samples: int, enabled: str = "true") -> tuple[Rollout, Path, Clock]:
    p = tmp_path / "switchover.yaml"
    p.write_text(CONFIG.format(min_samples=min_samples, enabled=enabled))
    (tmp_path / "gw").mkdir()
    write_ledger(tmp_path / "gw", [])
    clock = Clock(1000.0)
    r = Rollout(load_migration(p), p, clock=clock)
    assert r.advance(why="start").state.stage == "5%"
    return r, tmp_path / "gw", clock


def _pairs(n: int, t0: float, *, new_error_every: int = 0) -> list:
    rows = []
    for i in range(n):
        rows.append(row(t0 + i * 0.01, "old"))
        bad = new_error_every and i % new_error_every == 0
        rows.append(row(t0 + i * 0.01 + 0.005, "new", outcome="error" if bad else "ok", status=502 if bad else 200))
    return rows


def test_judge_rolls_back_a_stage_the_gates_still_hold_and_audits_the_request_count(tmp_path: Path) -> None:
    r, ledger, clock = _at_five(tmp_path, min_samples=100_000)  # the error-rate gate holds for samples
    write_ledger(ledger, _pairs(2000, 1001.0, new_error_every=20), index=1)  # new fails 5 %, old never
    clock.t = 1100.0
    res = r.check(auto_advance=False, why="watch")
    assert res.action == "auto_rollback" and res.state.stage == "0%"
    audit = [orjson.loads(line) for line in r.store.audit_path.read_bytes().splitlines()]
    last = audit[-1]
    assert "judge: error rate_difference" in last["why"] and "new requests" in last["why"]
    assert last["gates"]["error_rate"] == "hold"
    verdict = last["gates"]["judge error rate_difference"]
    assert verdict.startswith("fail (") and verdict.endswith(" requests)")
    assert int(verdict[len("fail (") :].split()[0]) <= 4000


def test_judge_off_keeps_todays_hold_on_the_same_ledger(tmp_path: Path) -> None:
    r, ledger, clock = _at_five(tmp_path, min_samples=100_000, enabled="false")
    write_ledger(ledger, _pairs(2000, 1001.0, new_error_every=20), index=1)
    clock.t = 1100.0
    res = r.check(auto_advance=False, why="watch")
    assert res.action == "hold" and res.report is not None and res.report.judge is None


def test_judge_no_regression_ends_the_stage_early(tmp_path: Path) -> None:
    r, ledger, clock = _at_five(tmp_path, min_samples=100_000)
    write_ledger(ledger, _pairs(5000, 1001.0), index=1)  # no errors, no fallbacks on either arm
    clock.t = 1100.0
    report = r.gate_report()
    assert report.judge is not None and report.judge.verdict == "ok"
    assert [g.verdict for g in report.results] == ["hold", "hold"] and report.decision == "advance"
    res = r.check(auto_advance=True, why="watch")
    assert res.action == "advance" and res.state.stage == "20%"


def test_judge_reads_only_the_stage_s_own_requests(tmp_path: Path) -> None:
    r, ledger, clock = _at_five(tmp_path, min_samples=100_000)
    write_ledger(ledger, _pairs(2000, 10.0, new_error_every=20), index=1)  # before the stage was entered
    clock.t = 1100.0
    report = r.gate_report()
    assert report.judge is not None and all(d.requests == 0 for d in report.judge.decisions)
    assert report.decision == "hold"


def test_rollout_status_shows_each_metric_s_distance_to_a_decision(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    _, ledger, _ = _at_five(tmp_path, min_samples=100_000)
    write_ledger(ledger, _pairs(300, 1001.0), index=1)
    monkeypatch.chdir(tmp_path)
    code, out, _ = cli(capsys, "status")
    assert code == 0
    assert "judge (anytime-valid" in out and "undecided" in out
    code, out, _ = cli(capsys, "status", "--json")
    view = orjson.loads(out)
    (err,) = [d for d in view["judge"]["decisions"] if d["metric"] == "error"]
    assert err["direction"] == "undecided" and err["requests_new"] == 300 and err["to_decision"] is not None


def test_a_soft_judge_regression_holds_and_says_why(tmp_path: Path) -> None:
    p = tmp_path / "switchover.yaml"
    p.write_text(CONFIG.format(min_samples=100_000, enabled="true").replace("rate_floor: 0.0025", "hard: false"))
    write_ledger(tmp_path / "gw", [])
    clock = Clock(1000.0)
    r = Rollout(load_migration(p), p, clock=clock)
    r.advance(why="start")
    write_ledger(tmp_path / "gw", _pairs(2000, 1001.0, new_error_every=20), index=1)
    clock.t = 1100.0
    res = r.advance(why="next")
    assert res.action == "hold" and "judge: error rate_difference" in res.message
