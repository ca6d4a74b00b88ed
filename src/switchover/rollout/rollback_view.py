"""Everything about "can we still go back" in one record, for `switchover check` and `switchover report`: the last
drill (time to the first good answer on old), the rollback prerequisites checked now, and the holding window as
the rollout last judged it (holding.json)."""

from __future__ import annotations

from pathlib import Path

from pydantic import BaseModel, Field

from switchover.config import Migration
from switchover.evidence.drill import DrillResult
from switchover.rollout.controller import Rollout
from switchover.rollout.holding import HoldingReport, Prerequisite
from switchover.rollout.rollback_ready import latest_drill


class RollbackEvidence(BaseModel):
    """What `check` keeps as rollback.json and `report` shows."""

    rollout_status: str = Field(
        description="The rollout's status: not_started, in_progress, rolled_back, complete, holding or abandoned"
    )
    stage: str = Field(description="The rollout's stage ('0%' before the first)")
    drill: DrillResult | None = Field(
        default=None, description="The latest drill (drill.json under holding.drill.runs); None: none found"
    )
    drill_file: str | None = None
    prerequisites: list[Prerequisite] = Field(default_factory=list, description="What a rollback needs, checked now")
    holding: HoldingReport | None = Field(default=None, description="The last holding report, while/after holding")

    @property
    def blocking(self) -> list[Prerequisite]:
        return [p for p in self.prerequisites if p.blocks]


def rollback_evidence(migration: Migration, config_path: Path, *, check_old: bool = True) -> RollbackEvidence:
    """The record for the rollout of `migration` (the file at `config_path`); `check_old` runs old's 1-token check
    now (else the last one counts)."""
    r = Rollout(migration, config_path)
    state = r.state()
    if check_old:
        r.holding.check_old(force=True)
    pre = r.holding.prerequisites(r.holding.old_view(state))
    runs = Path(r.settings.holding.drill.runs).expanduser()
    found = latest_drill(runs if runs.is_absolute() else config_path.resolve().parent / runs)
    return RollbackEvidence(
        rollout_status=state.status.value,
        stage=state.stage_name,
        drill=found[1] if found else None,
        drill_file=str(found[0]) if found else None,
        prerequisites=pre,
        holding=r.holding.last_report() if state.holding is not None else None,
    )
