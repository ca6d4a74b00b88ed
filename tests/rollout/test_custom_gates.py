"""Custom gates: ledger expressions with per-task-type verdicts, the built-ins (JSON parse failures, output-length
shift, cache hits right after the switch), PromQL judging, settings validation, and a stage that rolls back on one."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pytest
import yaml

from switchover.config import load_migration
from switchover.config.rollout import GateThresholds, PrometheusSource, RolloutSettings, TaskTypeRule
from switchover.config.rollout_custom import CustomGate
from switchover.errors import BadInput, Unreachable
from switchover.rollout.baseline import Baseline
from switchover.rollout.controller import Rollout
from switchover.rollout.custom_gates import judge_ledger_gate, judge_promql, with_window
from switchover.rollout.prometheus import series_of as _series
from switchover.rollout.rows import TaskTyper, row_view
from tests.rollout.builders import Clock, row, traffic, write_ledger

TH = GateThresholds(min_samples=20)


def _view(routed: str = "new", **fields: Any) -> dict[str, Any]:
    base = dict(
        ts=1.0,
        routed=routed,
        arm=routed,
        outcome="ok",
        status=200,
        path="/v1/chat/completions",
        prompt_tokens=100,
        completion_tokens=20,
        finish_reason="stop",
        task_type="chat",
        json_valid=None,
        cached_tokens=None,
    )
    return base | fields


def test_a_ledger_gate_fails_on_the_one_task_type_that_got_worse() -> None:
    gate = CustomGate(name="truncation", ledger={"fail_when": "finish_reason == 'length'"}, max=0.12, by="task_type")
    views = [_view(task_type="chat") for _ in range(60)]
    views += [_view(task_type="code", finish_reason="length" if i % 3 == 0 else "stop") for i in range(30)]
    views += [_view(task_type="rare") for _ in range(3)]
    res = judge_ledger_gate(gate, views, TH)
    assert res.verdict == "fail" and "code: 10/30" in res.reason
    verdicts = {g.group: g.verdict for g in res.groups}
    assert verdicts == {"chat": "pass", "code": "fail", "rare": "hold"}
    overall = judge_ledger_gate(gate.model_copy(update={"by": None}), views, TH)
    assert overall.verdict == "pass"  # 10/93 overall hides it: the breakdown is what catches it


def test_a_ledger_gate_holds_on_few_rows_and_fails_early_when_no_outcome_could_pass() -> None:
    gate = CustomGate(name="errs", ledger={"fail_when": "status >= 500"}, max=0.05)
    assert judge_ledger_gate(gate, [_view() for _ in range(5)], TH).verdict == "hold"
    early = [_view(status=502, outcome="error") for _ in range(2)] + [_view() for _ in range(3)]
    assert judge_ledger_gate(gate, early, TH).verdict == "fail"  # 2 > 5 % of 20


def test_max_increase_compares_new_with_old_on_the_same_rows() -> None:
    gate = CustomGate(name="len", ledger={"fail_when": "finish_reason == 'length'"}, max_increase=0.05)
    old = [_view("old", finish_reason="length" if i % 5 == 0 else "stop") for i in range(40)]  # 20 %
    same = [_view(finish_reason="length" if i % 5 == 0 else "stop") for i in range(40)]
    worse = [_view(finish_reason="length" if i % 2 == 0 else "stop") for i in range(40)]  # 50 %
    assert judge_ledger_gate(gate, old + same, TH).verdict == "pass"
    res = judge_ledger_gate(gate, old + worse, TH)
    assert res.verdict == "fail" and "vs old 20.00%" in res.reason


def test_rows_outside_either_arm_never_count() -> None:
    gate = CustomGate(name="errs", ledger={"fail_when": "status >= 400"}, max=0.05)
    views = [_view() for _ in range(30)] + [_view(status=400, outcome="bad_request") for _ in range(30)]
    assert judge_ledger_gate(gate, views, TH).verdict == "pass"


def test_task_types_come_from_the_gateway_label_else_the_first_matching_rule() -> None:
    typer = TaskTyper(
        [
            TaskTypeRule(name="long", when="prompt_tokens > 1000"),
            TaskTypeRule(name="chat", when="startswith(path, '/v1/chat')"),
        ]
    )
    r = row(1.0, "new")
    assert row_view(r, typer)["task_type"] == "other"  # /v1/completions, no prompt tokens
    r.prompt_tokens = 5000
    assert row_view(r, typer)["task_type"] == "long"
    assert typer({"task_type": "summarize", "prompt_tokens": 5000}) == "summarize"


def test_parse_failure_rate_is_not_measured_until_the_ledger_records_json_validity() -> None:
    gate = CustomGate(name="json_ok", builtin="parse_failure_rate")
    res = judge_ledger_gate(gate, [_view() for _ in range(50)], TH)
    assert res.verdict == "hold" and "not measured" in res.reason and "json_valid" in res.reason
    views = [_view(json_valid=i % 10 != 0) for i in range(50)] + [_view()]  # 10 % invalid; one non-JSON request
    res = judge_ledger_gate(gate, views, TH)
    assert res.verdict == "fail" and "5/50" in res.reason and res.hard


def _lengths(routed: str, n: int, scale: float, seed: int) -> list[dict[str, Any]]:
    rng = np.random.default_rng(seed)
    return [_view(routed, completion_tokens=int(rng.lognormal(5, 0.3) * scale)) for _ in range(n)]


def test_output_length_shift_flags_a_shorter_new_model_as_a_soft_gate() -> None:
    gate = CustomGate(name="length", builtin="output_length_shift")
    assert gate.hard is False and gate.max == 0.25
    same = judge_ledger_gate(gate, _lengths("old", 200, 1.0, 1) + _lengths("new", 200, 1.0, 2), TH)
    assert same.verdict == "pass", same.reason
    short = judge_ledger_gate(gate, _lengths("old", 200, 1.0, 1) + _lengths("new", 200, 0.6, 2), TH)
    assert short.verdict == "fail" and "-4" in short.reason and "vs old" in short.reason


def test_output_length_shift_holds_when_old_answers_are_empty_instead_of_passing_a_0_shift() -> None:
    gate = CustomGate(name="length", builtin="output_length_shift")
    empty_old = [_view("old", completion_tokens=0) for _ in range(200)]
    res = judge_ledger_gate(gate, empty_old + _lengths("new", 200, 1.0, 2), TH)
    assert res.verdict == "hold" and "not measured" in res.reason, res.reason


def test_output_length_shift_uses_the_baseline_once_old_serves_nothing() -> None:
    gate = CustomGate(name="length", builtin="output_length_shift", by="task_type")
    base = Baseline(
        taken_at=0, output_tokens={"chat": [float(v["completion_tokens"]) for v in _lengths("old", 200, 1.0, 1)]}
    )
    res = judge_ledger_gate(gate, _lengths("new", 200, 1.5, 2), TH, baseline=base)
    assert res.verdict == "fail" and "vs baseline" in res.reason and res.groups[0].group == "chat"


def test_the_first_requests_after_the_switch_must_see_no_cache_hits() -> None:
    gate = CustomGate(name="cold", builtin="cache_hits_after_switch", first_n=20)
    assert judge_ledger_gate(gate, [], TH, views_since_switch=[_view()]).verdict == "hold"  # not measured
    cold = [_view(ts=float(i), cached_tokens=0) for i in range(25)]
    assert judge_ledger_gate(gate, [], TH, views_since_switch=cold).verdict == "pass"
    stale = [_view(ts=float(i), cached_tokens=60) for i in range(25)]  # 60 % of the prompt from a cache
    res = judge_ledger_gate(gate, [], TH, views_since_switch=stale)
    assert res.verdict == "fail" and "cache key" in res.reason and res.samples == 20


def test_promql_results_are_judged_per_series_and_by_label() -> None:
    gate = CustomGate(name="q", promql="x[{window}]", max=2.0, by="task")
    res = judge_promql(gate, [({"task": "chat"}, 0.5), ({"task": "code"}, 3.0), ({"task": "rag"}, None)], "q")
    assert res.verdict == "fail" and {g.group: g.verdict for g in res.groups} == {
        "chat": "pass",
        "code": "fail",
        "rag": "hold",
    }
    assert judge_promql(gate, [], "q").verdict == "hold"
    low = CustomGate(name="hit_rate", promql="y", min=0.5)
    assert judge_promql(low, [({}, 0.2)], "y").verdict == "fail"
    assert with_window("rate(x[{window}])", 299.7) == "rate(x[299s])"


def test_prometheus_answers_of_an_unexpected_shape_are_named_not_a_traceback() -> None:
    src = PrometheusSource(url="http://127.0.0.1:9090")
    ok = {"resultType": "vector", "result": [{"metric": {"arm": "new"}, "value": [1.0, "NaN"]}]}
    assert _series(src, "q", ok) == [({"arm": "new"}, None)]  # NaN: no samples, judged hold
    assert _series(src, "q", {"resultType": "scalar", "result": [1.0, "2.5"]}) == [({}, 2.5)]
    for bad in (
        {"resultType": "vector", "result": [{"metric": {}}]},
        {"resultType": "vector", "result": [{"value": [1.0, "many"]}]},
        {"resultType": "scalar", "result": "2"},
        None,
        {"resultType": "histogram"},
    ):
        with pytest.raises(Unreachable, match="unexpected shape"):
            _series(src, "q", bad)
    with pytest.raises(BadInput, match="range vector"):
        _series(src, "q", {"resultType": "matrix", "result": [{"metric": {}, "values": [[1.0, "1"]]}]})


def test_a_prometheus_timeout_too_large_for_a_socket_is_refused_by_the_config() -> None:
    """urlopen raises OverflowError (a traceback) for timeout=1e308; the field bound names it instead."""
    import pydantic

    with pytest.raises(pydantic.ValidationError, match="timeout_s"):
        PrometheusSource(url="http://127.0.0.1:9090", timeout_s=1e308)
    assert PrometheusSource(url="http://127.0.0.1:9090", timeout_s=300).timeout_s == 300


@pytest.mark.parametrize(
    ("gate", "message"),
    [
        ({"name": "a"}, "exactly one of promql, ledger, builtin"),
        ({"name": "a", "promql": "up", "builtin": "output_length_shift"}, "exactly one"),
        ({"name": "a", "promql": "up"}, "needs max or min"),
        ({"name": "a", "ledger": {"fail_when": "statuss == 1"}, "max": 0.1}, "unknown field 'statuss'"),
        ({"name": "a", "ledger": {"fail_when": "status == 1"}, "max": 0.1, "by": "tenantt"}, "by must be a ledger"),
        ({"name": "A b", "promql": "up", "max": 1}, "lower_snake_case"),
        ({"name": "a", "promql": "up", "max": float("nan")}, "finite number"),  # NaN would pass every value
        ({"name": "a", "ledger": {"fail_when": "status == 1"}, "max": float("nan")}, "finite number"),
    ],
)
def test_bad_custom_gates_are_refused_naming_the_problem(gate: dict[str, Any], message: str) -> None:
    with pytest.raises(ValueError, match=message):
        CustomGate.model_validate(gate)


def test_stages_name_custom_gates_and_unknown_ones_are_refused() -> None:
    s = RolloutSettings.model_validate(
        {
            "stages": [{"weight": 5, "gates": ["error_rate", "json_ok", "cold_cache"]}],
            "custom_gates": [
                {"name": "json_ok", "builtin": "parse_failure_rate"},
                {"name": "cold_cache", "builtin": "cache_hits_after_switch"},
            ],
        }
    )
    assert s.stages[0].custom == ["json_ok", "cold_cache"] and [g.value for g in s.stages[0].gates or []] == [
        "error_rate"
    ]
    with pytest.raises(ValueError, match="unknown gates \\['nope'\\]"):
        RolloutSettings.model_validate({"stages": [{"weight": 5, "gates": ["nope"]}]})
    with pytest.raises(ValueError, match="built-in gate names"):
        RolloutSettings.model_validate({"custom_gates": [{"name": "error_rate", "promql": "up", "max": 1}]})


CONFIG = """\
old: {url: "http://127.0.0.1:18001", engine: vllm}
new: {url: "http://127.0.0.1:18002", engine: llamacpp}
gateway:
  weight: 0
  rollback: false
  run_dir: gw
"""


def _started(tmp_path: Path, rollout: str) -> tuple[Rollout, Clock]:
    """A rollout of CONFIG plus `rollout` (the rollout: section), advanced to its first stage at t=1000."""
    cfg = tmp_path / "switchover.yaml"
    cfg.write_text(CONFIG + rollout + "  entry: {enabled: false}   # the entry evidence: test_entry*.py\n")
    clock = Clock(1000.0)
    r = Rollout(load_migration(cfg), cfg, clock=clock)
    r.advance(why="start")
    return r, clock


def test_a_stage_rolls_back_when_a_hard_custom_gate_fails(tmp_path: Path) -> None:
    r, clock = _started(
        tmp_path,
        """\
rollout:
  stages: [5, {weight: 20, gates: [short_answers]}, 50]
  window_s: 3600
  gates: {min_samples: 30}
  task_types: [{name: long, when: "completion_tokens > 1000"}]
  custom_gates:
    - {name: short_answers, ledger: {fail_when: "completion_tokens < 15"}, max: 0.02, by: task_type}
""",
    )
    write_ledger(tmp_path / "gw", traffic(1001.0, 300, new_share=0.5, seed=1))
    clock.t = 1100.0
    assert r.advance(why="5% ok").state.stage == "20%"
    write_ledger(tmp_path / "gw", traffic(1101.0, 300, new_share=0.5, seed=2), index=1)  # tokens 10..60
    clock.t = 1200.0
    res = r.check(auto_advance=True, why="watch")
    assert res.action == "auto_rollback" and res.state.stage == "5%", res.message
    assert res.report is not None and res.report.summary()["short_answers"] == "fail"
    assert "other:" in res.message  # the task type that failed is named
    assert yaml.safe_load(r.config_path.read_text())["gateway"]["weight"] == 5


def test_an_invalid_expression_in_the_file_is_a_usage_error_naming_the_field(tmp_path: Path) -> None:
    cfg = tmp_path / "switchover.yaml"
    cfg.write_text(CONFIG + "rollout:\n  custom_gates:\n    - {name: x, ledger: {fail_when: 'status =! 1'}, max: 1}\n")
    with pytest.raises(BadInput, match=r"rollout\.custom_gates\.0\.ledger\.fail_when"):
        load_migration(cfg)


def _rated(db: Path, ratings: dict[str, list[str]]) -> None:
    from switchover.evidence.review import Pair
    from switchover.evidence.review_store import ReviewStore

    store = ReviewStore.open(db)
    try:
        for task, rs in ratings.items():
            for i, rating in enumerate(rs):
                pid = store.add_pair(
                    Pair(
                        ts=1.0,
                        day="2025-01-01",
                        task_type=task,
                        request_id=f"{task}{i}",
                        path="/v1/chat/completions",
                        prompt="p",
                        old_answer="a",
                        new_answer="b",
                    )
                )
                store.rate(pid, rating)
    finally:
        store.close()


def test_the_spot_check_rating_gate_blocks_a_stage_from_the_review_database(tmp_path: Path) -> None:
    r, clock = _started(
        tmp_path,
        """\
rollout:
  stages: [5, {weight: 20, gates: [spot_check_rating]}, 50]
  window_s: 3600
  gates: {min_samples: 10}
""",
    )
    write_ledger(tmp_path / "gw", traffic(1001.0, 100, new_share=0.5, seed=1))
    clock.t = 1100.0
    assert r.advance(why="5% ok").state.stage == "20%"
    res = r.advance(why="no ratings yet")
    assert res.action == "hold" and "no review database" in res.message  # never passes on missing data
    _rated(tmp_path / "gw" / "review.sqlite", {"chat": ["same"] * 12, "code": ["worse"] * 6 + ["same"] * 6})
    res = r.check(auto_advance=True, why="watch")
    assert res.action == "auto_rollback" and "code 50% of 12" in res.message, res.message


def test_the_cache_gate_judges_the_first_new_answers_after_the_switch_read_from_the_ledger(tmp_path: Path) -> None:
    r, clock = _started(
        tmp_path,
        """\
rollout:
  stages: [{weight: 5, gates: [cold_cache]}, 20]
  window_s: 3600
  custom_gates: [{name: cold_cache, builtin: cache_hits_after_switch, first_n: 20}]
""",
    )  # the switch: new gets traffic from t=1000

    def new_rows(ts0: float, n: int, cached: int) -> list[Any]:
        return [
            row(ts0 + i, "new").model_copy(update={"cached_tokens": cached, "prompt_tokens": 100}) for i in range(n)
        ]

    before = new_rows(900.0, 30, 90)  # a warm cache before the switch does not count
    # written out of time order: the gate takes the first answers by time, not by file position
    write_ledger(tmp_path / "gw", before + new_rows(1100.0, 40, 60) + new_rows(1001.0, 20, 0))
    clock.t = 1200.0
    (res,) = r.gate_report().custom
    assert res.verdict == "pass" and res.samples == 20 and res.observed == 0.0, res.reason
    write_ledger(tmp_path / "gw", new_rows(1000.1, 2, 100), index=1)  # two earlier answers, fully cached
    (res,) = r.gate_report().custom
    assert res.verdict == "fail" and res.observed == pytest.approx(200 / 2000), res.reason
