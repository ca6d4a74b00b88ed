"""The rollout's edges: load settings, read evidence, apply the state machine, drive the gateway, persist.

Every state change happens under the store's lock, in this order: drive the gateway (the risky step), then
save the state, then append the audit line; if the gateway file cannot be edited nothing is recorded.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, Field

from switchover.config import Migration, load_migration
from switchover.errors import BadInput
from switchover.rollout import stages as sm
from switchover.rollout.driver import apply_to_gateway
from switchover.rollout.gates import (
    GateReport,
    WindowStats,
    decide,
    evaluate,
    read_ledger_rows,
    stats_from_ledger,
    stats_from_prometheus,
)
from switchover.rollout.settings import RolloutSettings
from switchover.rollout.stages import RolloutState, Transition
from switchover.rollout.store import RolloutStore, actor

Clock = Callable[[], float]


class StatusView(BaseModel):
    """What `rollout status` prints."""

    status: sm.Status
    stage: str
    weight: int
    shadow: bool
    next_stage: str | None
    entered_at: float | None
    rollbacks_in_stage: int
    stages: list[str]
    state_file: str
    audit_log: str
    recent: list[Transition] = Field(default_factory=list)
    warnings: list[str] = Field(default_factory=list)


class ActionResult(BaseModel):
    """What `advance` / `rollback` / `abandon` / one `watch` check did."""

    action: Literal["advance", "hold", "rollback", "auto_rollback", "abandon", "none", "idle"]
    state: StatusView
    transition: Transition | None = None
    report: GateReport | None = None
    message: str


class Rollout:
    """One migration file's rollout."""

    def __init__(self, config_path: Path, *, clock: Clock = time.time, ledger: Path | None = None) -> None:
        self.config_path = config_path
        self.migration: Migration = load_migration(config_path)
        settings = getattr(self.migration, "rollout", None)
        self.settings: RolloutSettings = settings if settings is not None else RolloutSettings()
        self.store = RolloutStore(self.settings.state_path(config_path))
        self.clock = clock
        self._ledger = ledger

    # --- reading -------------------------------------------------------------------------------------
    def state(self) -> RolloutState:
        return self.store.load() or sm.initial_state(self.settings.stages)

    def ledger_path(self) -> Path:
        if self._ledger is not None:
            return self._ledger
        if self.settings.ledger:
            p = Path(self.settings.ledger).expanduser()
            return p if p.is_absolute() else self.config_path.resolve().parent / p
        gateway = getattr(self.migration, "gateway", None)
        if gateway is not None and hasattr(gateway, "resolved_run_dir"):
            return Path(gateway.resolved_run_dir(self.config_path))
        raise BadInput("no ledger to read: set rollout.ledger (the gateway's run_dir) or pass --ledger")

    def view(self, state: RolloutState | None = None, recent: int = 5) -> StatusView:
        state = state or self.state()
        nxt = state.next_stage()
        warnings = []
        names = [s.name for s in self.settings.stages]
        if [s.name for s in state.stages] != names:
            warnings.append(
                "the stages in switchover.yaml changed since this rollout started; the state file's "
                "stages are used (`switchover rollout reset` adopts the new ones)"
            )
        gateway = getattr(self.migration, "gateway", None)
        shadow_cfg = getattr(gateway, "shadow", None)
        if any(s.shadow for s in state.stages) and shadow_cfg is not None and not getattr(shadow_cfg, "percent", 0):
            warnings.append("a stage expects shadow traffic but gateway.shadow.percent is 0")
        return StatusView(
            status=state.status,
            stage=state.stage_name,
            weight=state.weight,
            shadow=state.shadow,
            next_stage=nxt.name if nxt and state.status != sm.Status.ABANDONED else None,
            entered_at=state.entered_at,
            rollbacks_in_stage=state.rollbacks_in_stage,
            stages=[s.name for s in state.stages],
            state_file=str(self.store.state_path),
            audit_log=str(self.store.audit_path),
            recent=self.store.audit()[-recent:] if recent else [],
            warnings=warnings,
        )

    def window_stats(self, state: RolloutState) -> WindowStats:
        now = self.clock()
        since = now - self.settings.window_s
        if state.entered_at is not None:
            since = max(since, state.entered_at)
        if self.settings.source == "prometheus":
            assert self.settings.prometheus is not None
            window = max(1.0, min(self.settings.window_s, now - (state.entered_at or since)))
            return stats_from_prometheus(self.settings.prometheus, window_s=window)
        got = read_ledger_rows(self.ledger_path(), since)
        rows = [r for r in got.rows if r.ts <= now]
        return stats_from_ledger(
            rows, window_s=now - since, with_shadow=state.shadow, th=self.settings.gates, skipped=got.skipped
        )

    def gate_report(self, state: RolloutState | None = None) -> GateReport:
        """Judge the current stage's exit gates and the next stage's entry conditions."""
        state = state or self.state()
        stage = state.stage
        now = self.clock()
        if stage is None:
            stats = WindowStats(
                source=self.settings.source,
                window_s=0,
                notes=["not started: the first stage has no exit gates to pass"],
            )
            return GateReport(stage="0%", decision="advance", results=[], stats=stats)
        stats = self.window_stats(state)
        results = evaluate(stats, stage.gates or [], self.settings.gates)
        blockers = sm.entry_blockers(state, now)
        return GateReport(
            stage=stage.name,
            decision=decide(results, blockers),
            results=results,
            stats=stats,
            blockers=blockers,
        )

    # --- changing ------------------------------------------------------------------------------------
    def _commit(self, new: RolloutState, transition: Transition, *, rollback_flag: bool) -> None:
        apply_to_gateway(self.config_path, weight=new.weight, rollback=rollback_flag)
        self.store.save(new)
        self.store.append(transition)

    def advance(self, *, why: str, force: bool = False) -> ActionResult:
        with self.store.locked():
            state = self.state()
            if state.status == sm.Status.ABANDONED:
                raise BadInput("this rollout was abandoned; `switchover rollout reset` starts a new one")
            if state.next_stage() is None:
                return ActionResult(action="none", state=self.view(state), message="already at the last stage")
            report = self.gate_report(state)
            if report.decision == "rollback":
                return self._auto_rollback(state, report)
            if report.decision == "hold" and not force:
                reasons = [r.reason for r in report.results if r.verdict != "pass"] + report.blockers
                return ActionResult(
                    action="hold",
                    state=self.view(state),
                    report=report,
                    message="hold: " + "; ".join(reasons),
                )
            forced = report.decision == "hold"
            text = why + (
                " [forced past: "
                + "; ".join([r.reason for r in report.results if r.verdict != "pass"] + report.blockers)
                + "]"
                if forced
                else ""
            )
            new, tr = sm.advance(state, now=self.clock(), who=actor(), why=text, gates=report.summary())
            self._commit(new, tr, rollback_flag=False)
            return ActionResult(
                action="advance",
                state=self.view(new),
                transition=tr,
                report=report,
                message=f"advanced {tr.from_stage} → {tr.to_stage} (new weight {tr.to_weight}%)",
            )

    def _auto_rollback(self, state: RolloutState, report: GateReport) -> ActionResult:
        failed = [r for r in report.results if r.verdict == "fail" and r.hard]
        why = "hard gate failed: " + "; ".join(r.reason for r in failed)
        new, tr = sm.rollback(
            state,
            to=self.settings.on_fail,
            now=self.clock(),
            who=actor(),
            why=why,
            automatic=True,
            gates=report.summary(),
        )
        self._commit(new, tr, rollback_flag=new.index < 0)
        return ActionResult(
            action="auto_rollback",
            state=self.view(new),
            transition=tr,
            report=report,
            message=f"rolled back {tr.from_stage} → {tr.to_stage}: {why}",
        )

    def rollback(self, *, to: Literal["previous", "zero"], why: str) -> ActionResult:
        with self.store.locked():
            state = self.state()
            new, tr = sm.rollback(state, to=to, now=self.clock(), who=actor(), why=why)
            self._commit(new, tr, rollback_flag=new.index < 0)
            return ActionResult(
                action="rollback",
                state=self.view(new),
                transition=tr,
                message=f"rolled back {tr.from_stage} → {tr.to_stage} (new weight {tr.to_weight}%)",
            )

    def abandon(self, *, criteria: list[str], why: str, force: bool = False) -> ActionResult:
        with self.store.locked():
            state = self.state()
            new, tr = sm.abandon(state, criteria=criteria, now=self.clock(), who=actor(), why=why, force=force)
            self._commit(new, tr, rollback_flag=True)
            return ActionResult(
                action="abandon",
                state=self.view(new),
                transition=tr,
                message=f"abandoned at {tr.from_stage}; gateway rolled back to old "
                f"(criteria: {', '.join(tr.criteria) or 'none'})",
            )

    def reset(self, *, why: str) -> ActionResult:
        """Start over at 0 % with the stages now in switchover.yaml (the audit log is kept)."""
        with self.store.locked():
            old = self.state()
            new = sm.initial_state(self.settings.stages).model_copy(update=dict(entered_at=self.clock()))
            tr = Transition(
                ts=self.clock(),
                who=actor(),
                action="rollback",
                from_stage=old.stage_name,
                to_stage="0%",
                from_weight=old.weight,
                to_weight=0,
                why=f"reset: {why}",
            )
            self._commit(new, tr, rollback_flag=False)
            return ActionResult(
                action="rollback",
                state=self.view(new),
                transition=tr,
                message="reset to 0% with the stages in switchover.yaml",
            )

    def check(self, *, auto_advance: bool, why: str) -> ActionResult:
        """One `watch` tick: roll back on a failed hard gate; advance on pass if asked; otherwise report."""
        with self.store.locked():
            state = self.state()
            if state.status == sm.Status.ABANDONED or state.index < 0:
                return ActionResult(
                    action="idle", state=self.view(state), message=f"nothing to watch ({state.status.value})"
                )
            report = self.gate_report(state)
            if report.decision == "rollback":
                return self._auto_rollback(state, report)
            if report.decision == "advance" and auto_advance and state.next_stage() is not None:
                new, tr = sm.advance(state, now=self.clock(), who=actor(), why=why, gates=report.summary())
                self._commit(new, tr, rollback_flag=False)
                return ActionResult(
                    action="advance",
                    state=self.view(new),
                    transition=tr,
                    report=report,
                    message=f"advanced {tr.from_stage} → {tr.to_stage}",
                )
            return ActionResult(
                action="hold" if report.decision == "hold" else "none",
                state=self.view(state),
                report=report,
                message=f"{report.stage}: {report.decision}",
            )


def audit_dicts(store: RolloutStore) -> list[dict[str, Any]]:
    return [t.model_dump(mode="json") for t in store.audit()]
