"""The rollout section's defaults and validation, and the stage state machine's transitions."""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from switchover.config.rollout import GateName, RolloutSettings
from switchover.errors import BadInput
from switchover.rollout import stages as sm


def test_default_stages_follow_seed_000_section_7() -> None:
    s = RolloutSettings()
    assert [(st.name, st.weight, st.shadow) for st in s.stages] == [
        ("shadow", 0, True),
        ("5%", 5, False),
        ("20%", 20, False),
        ("50%", 50, False),
        ("100%", 100, False),
    ]
    assert s.stages[0].gates == [GateName.SHADOW_DISTRIBUTION]
    assert GateName.TPOT_P99_RATIO not in (s.stages[1].gates or [])  # small stage: error, TTFT, fallback
    assert GateName.TPOT_P99_RATIO in (s.stages[2].gates or [])  # medium adds the TPOT tail
    assert [st.require_zero_rollbacks for st in s.stages] == [False, False, True, True, True]


@pytest.mark.parametrize(
    ("stages", "message"),
    [
        ([5, 2], "must not decrease"),
        ([5, 5], "duplicate stage names"),
        ([150], "less than or equal to 100"),
        ([], "at least one stage"),
        (["canary"], "valid dictionary"),
    ],
)
def test_bad_stage_lists_are_rejected_naming_the_problem(stages: list, message: str) -> None:
    with pytest.raises(ValidationError, match=message):
        RolloutSettings(stages=stages)


def test_stage_mapping_and_percent_strings_are_accepted() -> None:
    s = RolloutSettings(stages=["shadow", "10%", {"weight": 100, "min_duration_s": 60, "gates": ["error_rate"]}])
    assert [st.name for st in s.stages] == ["shadow", "10%", "100%"]
    assert s.stages[2].gates == [GateName.ERROR_RATE] and s.stages[2].min_duration_s == 60


def test_prometheus_source_needs_a_url() -> None:
    with pytest.raises(ValidationError, match="prometheus"):
        RolloutSettings(source="prometheus")


def _state() -> sm.RolloutState:
    return sm.initial_state(RolloutSettings(stages=["shadow", 5, 20]).stages)


def test_advance_walks_the_stages_and_completes_at_the_last() -> None:
    s = _state()
    seen = []
    for t in range(3):
        s, tr = sm.advance(s, now=float(t), who="a@h", why="ok")
        seen.append((tr.from_stage, tr.to_stage, tr.to_weight, s.status))
    assert seen == [
        ("0%", "shadow", 0, sm.Status.IN_PROGRESS),
        ("shadow", "5%", 5, sm.Status.IN_PROGRESS),
        ("5%", "20%", 20, sm.Status.COMPLETE),
    ]
    with pytest.raises(BadInput, match="last stage"):
        sm.advance(s, now=4.0, who="a@h", why="more")


@pytest.mark.parametrize(
    ("to", "stage", "weight", "status"),
    [("previous", "shadow", 0, sm.Status.ROLLED_BACK), ("zero", "0%", 0, sm.Status.NOT_STARTED)],
)
def test_rollback_goes_one_stage_back_or_to_zero(to: str, stage: str, weight: int, status: sm.Status) -> None:
    s = _state()
    for t in range(2):
        s, _ = sm.advance(s, now=float(t), who="a@h", why="ok")
    s, tr = sm.rollback(s, to=to, now=5.0, who="b@h", why="bad", automatic=True)  # type: ignore[arg-type]
    assert (s.stage_name, s.weight, s.status, tr.action) == (stage, weight, status, "auto_rollback")
    assert tr.from_stage == "5%" and tr.who == "b@h" and tr.why == "bad"


def test_rollback_at_zero_is_refused() -> None:
    with pytest.raises(BadInput, match="0 %"):
        sm.rollback(_state(), to="previous", now=0.0, who="a@h", why="x")


def test_a_rollback_blocks_entry_to_a_stage_requiring_zero_rollbacks() -> None:
    s = _state()
    for t in range(3):
        s, _ = sm.advance(s, now=float(t), who="a@h", why="ok")  # at 20 %
    s, _ = sm.rollback(s, to="previous", now=10.0, who="a@h", why="x")  # back at 5 %, next is 20 %
    assert s.rollbacks_in_stage == 1
    assert any("zero rollbacks" in b for b in sm.entry_blockers(s, now=11.0))


def test_min_duration_blocks_advancing_until_it_has_passed() -> None:
    st = RolloutSettings(stages=[{"weight": 5, "min_duration_s": 100}, 50]).stages
    s, _ = sm.advance(sm.initial_state(st), now=0.0, who="a@h", why="ok")
    assert sm.entry_blockers(s, now=50.0)
    assert sm.entry_blockers(s, now=100.0) == []


def test_abandon_needs_two_seed_criteria_unless_forced_and_is_terminal() -> None:
    s, _ = sm.advance(_state(), now=0.0, who="a@h", why="ok")
    with pytest.raises(BadInput, match="at least 2"):
        sm.abandon(s, criteria=["hard_metrics"], now=1.0, who="a@h", why="x")
    with pytest.raises(BadInput, match="unknown"):
        sm.abandon(s, criteria=["hard_metrics", "vibes"], now=1.0, who="a@h", why="x")
    s2, tr = sm.abandon(s, criteria=["narrow_gain", "hard_metrics"], now=1.0, who="a@h", why="x")
    assert s2.status == sm.Status.ABANDONED and s2.weight == 0 and tr.criteria == ["hard_metrics", "narrow_gain"]
    with pytest.raises(BadInput, match="abandoned"):
        sm.advance(s2, now=2.0, who="a@h", why="again")
    s3, tr3 = sm.abandon(s, criteria=["release_cadence"], now=1.0, who="a@h", why="x", force=True)
    assert s3.status == sm.Status.ABANDONED and tr3.criteria == ["release_cadence"]
