"""The staged rollout as a pure state machine: (state, action, evidence) -> (new state, transition).

No I/O here: the store (store.py) persists states and the audit log; the driver (driver.py) applies weights
to the gateway. Stage index -1 means "not started": 0 %, no shadow.
"""

from __future__ import annotations

from enum import StrEnum
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

from switchover.config.rollout import StageSpec
from switchover.errors import BadInput
from switchover.rollout.abandon import ABANDON_CRITERIA, ABANDON_THRESHOLD
from switchover.rollout.holding import HoldingState


class Status(StrEnum):
    NOT_STARTED = "not_started"
    IN_PROGRESS = "in_progress"  # at a stage, gates pass or hold
    ROLLED_BACK = "rolled_back"  # the last transition was a rollback; may advance again
    COMPLETE = "complete"  # at the last stage (after the holding window, when there is one)
    HOLDING = "holding"  # at 100 %, the rollback window open: old kept warm and checked (holding.py)
    ABANDONED = "abandoned"  # terminal: the migration was called off (docs/rollout.md)


Action = Literal[
    "advance", "rollback", "abandon", "hold", "auto_rollback", "holding_start", "window_end", "holding_end"
]


class Transition(BaseModel):
    """One audit-log line: who moved the rollout from where to where, when, and why."""

    ts: float = Field(description="Wall-clock time (label only)")
    who: str = Field(description="user@host")
    action: Action
    from_stage: str
    to_stage: str
    from_weight: int
    to_weight: int
    why: str
    gates: dict[str, str] = Field(default_factory=dict, description="gate name -> pass | hold | fail")
    criteria: list[str] = Field(default_factory=list, description="Abandonment criteria that applied")
    window: str | None = Field(default=None, description="window_end: the failure type whose window closed")
    waived: dict[str, str] = Field(
        default_factory=dict, description="Entry items passed by `--waive ITEM --reason TEXT`: item -> reason"
    )


class RolloutState(BaseModel):
    """What is durable between commands (state.json)."""

    model_config = ConfigDict(allow_inf_nan=False)

    version: int = 1
    stages: list[StageSpec]
    index: int = Field(default=-1, description="Current stage; -1 = not started (0 %)")
    status: Status = Status.NOT_STARTED
    entered_at: float | None = Field(default=None, description="When the current stage was entered (wall clock)")
    rollbacks_in_stage: int = Field(default=0, description="Rollbacks into the current stage since it was entered")
    transitions: int = 0
    holding: HoldingState | None = Field(default=None, description="The rollback window after 100 %")

    @model_validator(mode="after")
    def _index_in_stages(self) -> RolloutState:
        if not -1 <= self.index < len(self.stages):
            raise ValueError(f"index {self.index} is outside the {len(self.stages)} stages (-1 = not started)")
        return self

    @property
    def stage(self) -> StageSpec | None:
        return self.stages[self.index] if self.index >= 0 else None

    @property
    def stage_name(self) -> str:
        return self.stage.name if self.stage else "0%"

    @property
    def weight(self) -> int:
        return self.stage.weight if self.stage else 0

    @property
    def shadow(self) -> bool:
        return bool(self.stage and self.stage.shadow)

    def next_stage(self) -> StageSpec | None:
        return self.stages[self.index + 1] if self.index + 1 < len(self.stages) else None


def initial_state(stages: list[StageSpec]) -> RolloutState:
    return RolloutState(stages=[s.model_copy() for s in stages])


def _moved(state: RolloutState, index: int, now: float, *, rolled_back: bool) -> RolloutState:
    if rolled_back:
        status = Status.NOT_STARTED if index < 0 else Status.ROLLED_BACK
    else:
        status = Status.COMPLETE if index == len(state.stages) - 1 else Status.IN_PROGRESS
    return state.model_copy(
        update=dict(
            index=index,
            status=status,
            entered_at=now,
            rollbacks_in_stage=1 if rolled_back else 0,
            transitions=state.transitions + 1,
            holding=None,
        )
    )


def enter_holding(state: RolloutState, holding: HoldingState) -> RolloutState:
    """At the last stage (100 %): the rollback window opens instead of `complete`."""
    return state.model_copy(update=dict(status=Status.HOLDING, holding=holding))


def update_holding(state: RolloutState, holding: HoldingState) -> RolloutState:
    """Windows closed; when the last one has, the rollout is complete."""
    status = Status.COMPLETE if holding.ended_at is not None else Status.HOLDING
    return state.model_copy(update=dict(status=status, holding=holding, transitions=state.transitions + 1))


def _ensure_active(state: RolloutState) -> None:
    if state.status == Status.ABANDONED:
        raise BadInput("this rollout was abandoned; start a new one with `switchover rollout reset`")


def entry_blockers(state: RolloutState, now: float, *, dwell: bool = True) -> list[str]:
    """Why the next stage may not be entered yet, besides the gates (dwell time, rollbacks in the stage); `dwell`
    False leaves the dwell time to the entry gates (rollout/entry.py), which --force cannot pass."""
    stage = state.stage
    if stage is None:
        return []
    out = []
    started = state.entered_at
    if dwell and stage.min_duration_s and started is not None and now - started < stage.min_duration_s:
        out.append(
            f"stage {stage.name} needs {stage.min_duration_s:g} s before advancing ({now - started:.0f} s so far)"
        )
    nxt = state.next_stage()
    if nxt is not None and nxt.require_zero_rollbacks and state.rollbacks_in_stage:
        out.append(
            f"stage {nxt.name} requires zero rollbacks in {stage.name}'s window; "
            f"{state.rollbacks_in_stage} happened (wait for a fresh window or --force)"
        )
    return out


def _transition(
    state: RolloutState,
    action: Action,
    to_stage: str,
    to_weight: int,
    *,
    now: float,
    who: str,
    why: str,
    gates: dict[str, str] | None = None,
    criteria: list[str] | None = None,
) -> Transition:
    """The audit-log line of a move from `state` to `to_stage` at `to_weight` %."""
    return Transition(
        ts=now,
        who=who,
        action=action,
        from_stage=state.stage_name,
        to_stage=to_stage,
        from_weight=state.weight,
        to_weight=to_weight,
        why=why,
        gates=gates or {},
        criteria=criteria or [],
    )


def advance(
    state: RolloutState,
    *,
    now: float,
    who: str,
    why: str,
    gates: dict[str, str] | None = None,
    waived: dict[str, str] | None = None,
) -> tuple[RolloutState, Transition]:
    """Move to the next stage (callers check gates, entry gates and entry_blockers first); `waived` is audited."""
    _ensure_active(state)
    nxt = state.next_stage()
    if nxt is None:
        raise BadInput(f"already at the last stage ({state.stage_name}); nothing to advance to")
    new = _moved(state, state.index + 1, now, rolled_back=False)
    tr = _transition(state, "advance", nxt.name, nxt.weight, now=now, who=who, why=why, gates=gates)
    return new, tr.model_copy(update=dict(waived=dict(waived or {})))


def rollback(
    state: RolloutState,
    *,
    to: Literal["previous", "zero"],
    now: float,
    who: str,
    why: str,
    automatic: bool = False,
    gates: dict[str, str] | None = None,
) -> tuple[RolloutState, Transition]:
    """Go back one stage, or straight to 0 % (not started)."""
    _ensure_active(state)
    if state.index < 0:
        raise BadInput("the rollout is at 0 % already; nothing to roll back")
    index = state.index - 1 if to == "previous" else -1
    new = _moved(state, index, now, rolled_back=True)
    return new, _transition(
        state,
        "auto_rollback" if automatic else "rollback",
        new.stage_name,
        new.weight,
        now=now,
        who=who,
        why=why,
        gates=gates,
    )


def abandon(
    state: RolloutState, *, criteria: list[str], now: float, who: str, why: str, force: bool = False
) -> tuple[RolloutState, Transition]:
    """Call the migration off: back to 0 % for good, recording which abandonment criteria applied."""
    _ensure_active(state)
    known = {c.key for c in ABANDON_CRITERIA}
    unknown = [c for c in criteria if c not in known]
    if unknown:
        raise BadInput(f"unknown abandonment criteria {unknown}; choose from {sorted(known)}")
    if len(set(criteria)) < ABANDON_THRESHOLD and not force:
        raise BadInput(
            f"switchover's rule (docs/rollout.md) is to consider abandoning when at least {ABANDON_THRESHOLD} criteria "
            "hold; "
            f"{len(set(criteria))} given",
            hint="name the criteria with --criterion (repeatable), or pass --force to abandon anyway",
        )
    new = state.model_copy(
        update=dict(
            index=-1,
            status=Status.ABANDONED,
            entered_at=now,
            rollbacks_in_stage=0,
            transitions=state.transitions + 1,
            holding=None,
        )
    )
    return new, _transition(state, "abandon", "0%", 0, now=now, who=who, why=why, criteria=sorted(set(criteria)))
