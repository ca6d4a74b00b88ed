"""The rollout's edges: load settings, read evidence, apply the state machine, drive the gateway, persist.

Every state change happens under the store's lock, in this order: drive the gateway (the risky step), then
save the state, then append the audit line; if the gateway file cannot be edited nothing is recorded.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Literal

from pydantic import BaseModel, Field

from switchover.config import Migration
from switchover.config.rollout import PrometheusSource, RolloutSettings
from switchover.config.rollout_custom import CustomGate
from switchover.errors import BadInput
from switchover.evidence.review import ReviewSummary
from switchover.ledger_files import stream_ledger_rows
from switchover.ledger_record import LedgerRow
from switchover.rollout import entry as en
from switchover.rollout import rollback_ready
from switchover.rollout import stages as sm
from switchover.rollout.custom_gates import Series, promql_vector
from switchover.rollout.driver import apply_to_gateway
from switchover.rollout.evidence import Window, judge_custom, read_window
from switchover.rollout.gates import GateReport, WindowStats, decide, evaluate
from switchover.rollout.holding import HoldingReport
from switchover.rollout.holding_control import HoldingDesk
from switchover.rollout.judge.panel import JudgeReport
from switchover.rollout.judge.stage import judge_failures, stage_judge, with_judge
from switchover.rollout.rollback_ready import MetricsCheck, ReadyCheck
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
    holding: HoldingReport | None = Field(default=None, description="The last holding report (holding.json)")
    judge: JudgeReport | None = Field(
        default=None, description="The judge per metric: requests so far, interval against the floor (judge on)"
    )


class ActionResult(BaseModel):
    """What `advance` / `rollback` / `abandon` / one `watch` check did."""

    action: Literal[
        "advance",
        "hold",
        "rollback",
        "auto_rollback",
        "abandon",
        "none",
        "idle",
        "refused",
        "rollback_blocked",
        "holding_end",
    ]
    state: StatusView
    transition: Transition | None = None
    transitions: list[Transition] = Field(default_factory=list, description="Every audit line this action wrote")
    report: GateReport | None = None
    message: str


class Rollout:
    """One migration file's rollout: `migration` is the file at `config_path`, loaded by the caller (the CLI); the
    path is where the state file sits beside and what the gateway edits rewrite."""

    def __init__(
        self,
        migration: Migration,
        config_path: Path,
        *,
        clock: Clock = time.time,
        ledger: Path | None = None,
        ready: ReadyCheck | None = None,
        metrics: MetricsCheck | None = None,
        query: Callable[[PrometheusSource, str], Series] = promql_vector,
    ) -> None:
        self.config_path = config_path
        self.migration = migration
        self.settings: RolloutSettings = migration.rollout or RolloutSettings()
        self.store = RolloutStore(self.settings.state_path(config_path))
        self.clock = clock
        self._ledger = ledger
        self.query = query
        # looked up at call time so a test (or an embedding tool) can replace the module's checkers
        old = migration.old  # old's own loading answer (its profile's readiness) tells loading from refusing
        engine = None if old.engine.value == "openai" else str(old.engine.value)
        self.holding = HoldingDesk(
            self,
            ready=ready
            or (lambda *a: rollback_ready.ready_check(*a, engine=engine, engine_version=old.engine_version)),
            metrics=metrics or (lambda url: rollback_ready.metrics_check(url)),
        )

    # --- reading -------------------------------------------------------------------------------------
    def state(self) -> RolloutState:
        return self.store.load() or sm.initial_state(self.settings.stages)

    def ledger_path(self) -> Path:
        if self._ledger is not None:
            return self._ledger
        if self.settings.ledger:
            p = Path(self.settings.ledger).expanduser()
            return p if p.is_absolute() else self.config_path.resolve().parent / p
        if self.migration.gateway is not None:
            return self.migration.gateway.resolved_run_dir(self.config_path)
        raise BadInput("no ledger to read: set rollout.ledger (the gateway's run_dir) or pass --ledger")

    def view(self, state: RolloutState | None = None, recent: int = 5, *, judge: bool = False) -> StatusView:
        """Where the rollout stands; with `judge`, also how far each judged metric is from a decision (reads the
        stage's ledger rows)."""
        state = state or self.state()
        nxt = state.next_stage()
        warnings = []
        names = [s.name for s in self.settings.stages]
        if [s.name for s in state.stages] != names:
            warnings.append(
                "the stages in switchover.yaml changed since this rollout started; the state file's "
                "stages are used (`switchover rollout reset` adopts the new ones)"
            )
        gateway = self.migration.gateway
        if any(s.shadow for s in state.stages) and gateway is not None and not gateway.shadow.percent:
            warnings.append("a stage expects shadow traffic but gateway.shadow.percent is 0")
        warnings += en.short_stages(state.stages, self.settings.peak_s, self.settings.cost.large_weight)
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
            holding=self.holding.last_report() if state.holding is not None else None,
            judge=stage_judge(self.settings.judge, state, self.ledger_path, self.clock()) if judge else None,
        )

    def window(self, state: RolloutState, *, window_s: float | None = None, gates: Sequence[CustomGate] = ()) -> Window:
        """The evidence of the current stage (for its built-in gates and custom `gates`): the last window_s
        seconds, never before the stage was entered."""
        now = self.clock()
        since = now - (window_s or self.settings.window_s)
        if state.entered_at is not None:
            since = max(since, state.entered_at)
        return read_window(self.settings, self.ledger_path, since=since, now=now, with_shadow=state.shadow, gates=gates)

    def window_stats(self, state: RolloutState) -> WindowStats:
        return self.window(state).stats

    def switch_ts(self) -> float | None:
        """When new first got traffic in this rollout (the first advance to a weight > 0 after the last reset)."""
        ts = None
        for t in self.store.audit():
            if t.action == "rollback" and t.why.startswith("reset:"):
                ts = None
            elif t.action == "advance" and t.to_weight > 0 and ts is None:
                ts = t.ts
        return ts

    def rows_since_switch(self) -> Iterator[LedgerRow]:
        """Ledger rows from the switch on, streamed (for the cache-hits-after-switch check, which keeps only its
        first first_n: days of rows since the switch are never held in memory)."""
        since = self.switch_ts()
        if since is None:
            return iter(())
        return stream_ledger_rows(self.ledger_path(), since)

    def review_summary(self) -> ReviewSummary | None:
        """The spot-check ratings (`switchover review`) from the gateway's review database, if there is one."""
        gateway = self.migration.gateway
        if gateway is None:
            return None
        path = gateway.resolved_run_dir(self.config_path) / gateway.review.db
        if not path.is_file():
            return None
        from switchover.evidence.review_store import ReviewStore

        store = ReviewStore.open(path, create=False)
        try:
            return store.summary()
        finally:
            store.close()

    def entry_report(self, state: RolloutState, waivers: dict[str, str] | None = None) -> en.EntryReport | None:
        """The evidence entering the next stage needs (check, pre-canary, cost, this stage's dwell time), judged;
        None when there is no next stage."""
        from switchover.rollout.entry_evidence import entry_items

        nxt = state.next_stage()
        if nxt is None or state.status == sm.Status.ABANDONED:
            return None
        items = entry_items(self, state, en.needs(state.stages, state.index + 1, self.settings.cost.large_weight))
        dwell = en.min_duration_item(state.stage, state.entered_at, self.clock())
        items += [dwell] if dwell is not None else []
        return en.EntryReport(
            stage=nxt.name, items=en.apply_waivers(items, waivers or {}), enforced=self.settings.entry.enabled
        )

    def gate_report(self, state: RolloutState | None = None, waivers: dict[str, str] | None = None) -> GateReport:
        """Judge the current stage's exit gates and the next stage's entry conditions (or, while holding, every
        open failure-type window)."""
        state = state or self.state()
        stage = state.stage
        now = self.clock()
        if state.status == sm.Status.HOLDING:
            return self.holding.gate_report(state)
        entry = self.entry_report(state, waivers)
        held = entry is not None and bool(entry.blocking)
        if stage is None:
            stats = WindowStats(
                source=self.settings.source,
                window_s=0,
                notes=["not started: the first stage has no exit gates; its entry needs the evidence listed"],
            )
            return GateReport(stage="0%", decision="hold" if held else "advance", results=[], stats=stats, entry=entry)
        custom_gates = [self.settings.custom_gate(n) for n in stage.custom]
        window = self.window(state, gates=custom_gates)
        results = evaluate(window.stats, stage.gates or [], self.settings.gates)
        custom = judge_custom(
            custom_gates,
            self.settings,
            window,
            since_switch=self.rows_since_switch,
            query=self.query,
            review=self.review_summary,
        )
        blockers = sm.entry_blockers(state, now, dwell=False) + self.holding.entry_blockers(state)
        judged = stage_judge(self.settings.judge, state, self.ledger_path, now)
        decision = with_judge(
            decide(results, blockers, custom),
            judged,
            self.settings.judge,
            results=results,
            custom=custom,
            blockers=blockers,
        )
        return GateReport(
            stage=stage.name,
            decision="hold" if decision == "advance" and held else decision,
            results=results,
            custom=custom,
            stats=window.stats,
            blockers=blockers,
            entry=entry,
            judge=judged,
        )

    # --- changing ------------------------------------------------------------------------------------
    def _commit(self, new: RolloutState, transition: Transition, *, rollback_flag: bool) -> list[Transition]:
        """Drive the gateway, save, audit; entering a 100 % last stage also opens the holding window."""
        apply_to_gateway(self.config_path, weight=new.weight, rollback=rollback_flag)
        lines = [transition]
        if transition.action == "advance":
            new, opened = self.holding.on_advance(new, transition)
            lines += opened
        self.store.save(new)
        for line in lines:
            self.store.append(line)
        return lines

    def advance(self, *, why: str, force: bool = False, waivers: dict[str, str] | None = None) -> ActionResult:
        """Enter the next stage when its gates pass and its entry evidence is there (--force passes a hold, never
        missing evidence: that takes a waiver, audited)."""
        en.check_waivers(waivers or {})
        with self.store.locked():
            state = self.state()
            if state.status == sm.Status.ABANDONED:
                raise BadInput("this rollout was abandoned; `switchover rollout reset` starts a new one")
            if state.status == sm.Status.HOLDING:
                return self.holding.step(state, why=why, force=force)
            if state.next_stage() is None:
                return ActionResult(action="none", state=self.view(state), message="already at the last stage")
            report = self.gate_report(state, waivers)
            if report.decision == "rollback":
                return self._auto_rollback(state, report)
            entry = report.entry
            if entry is not None and entry.blocking:
                return ActionResult(
                    action="refused",
                    state=self.view(state),
                    report=report,
                    message=f"refused: entering {entry.stage} needs evidence: {entry.refusal()}; "
                    "or --waive ITEM --reason TEXT (audited)",
                )
            if report.decision == "hold" and not force:
                return ActionResult(
                    action="hold",
                    state=self.view(state),
                    report=report,
                    message="hold: " + "; ".join(_short_of_pass(report)),
                )
            forced = report.decision == "hold"
            text = why + (" [forced past: " + "; ".join(_short_of_pass(report)) + "]" if forced else "")
            return self._advance(state, report, why=text)

    def _advance(self, state: RolloutState, report: GateReport, *, why: str) -> ActionResult:
        """Move to the next stage (the caller holds the lock and has judged the gates), drive the gateway, audit."""
        waived = {i.id: i.waived for i in (report.entry.items if report.entry else []) if i.waived is not None}
        new, tr = sm.advance(state, now=self.clock(), who=actor(), why=why, gates=report.summary(), waived=waived)
        lines = self._commit(new, tr, rollback_flag=False)
        return ActionResult(
            action="advance",
            state=self.view(),
            transition=tr,
            transitions=lines,
            report=report,
            message=f"advanced {tr.from_stage} → {tr.to_stage} (new weight {tr.to_weight}%)"
            + ("; holding: the rollback window is open" if len(lines) > 1 else ""),
        )

    def _auto_rollback(self, state: RolloutState, report: GateReport, *, to: str | None = None) -> ActionResult:
        failed = [r.reason for r in report.results if r.verdict == "fail" and r.hard]
        failed += [c.reason for c in report.custom if c.verdict == "fail" and c.hard]
        failed += judge_failures(report.judge) if self.settings.judge.hard else []
        if report.holding is not None and report.holding.reason:
            failed = [report.holding.reason]
        why = "hard gate failed: " + "; ".join(failed)
        return self._roll_back(state, to=to or self.settings.on_fail, why=why, report=report)  # type: ignore[arg-type]

    def _roll_back(
        self, state: RolloutState, *, to: Literal["previous", "zero"], why: str, report: GateReport | None = None
    ) -> ActionResult:
        """Go back (one stage, or to 0 %), drive the gateway, audit; automatic when a gate report decided it."""
        new, tr = sm.rollback(
            state,
            to=to,
            now=self.clock(),
            who=actor(),
            why=why,
            automatic=report is not None,
            gates=report.summary() if report is not None else None,
        )
        lines = self._commit(new, tr, rollback_flag=new.index < 0)
        return ActionResult(
            action="auto_rollback" if report is not None else "rollback",
            state=self.view(new),
            transition=tr,
            transitions=lines,
            report=report,
            message=f"rolled back {tr.from_stage} → {tr.to_stage}"
            + (f": {why}" if report is not None else f" (new weight {tr.to_weight}%)"),
        )

    def rollback(self, *, to: Literal["previous", "zero"] | None = None, why: str, force: bool = False) -> ActionResult:
        """By hand. While holding (or after it) old's readiness is checked first: a rollback onto an old engine
        that cannot answer is refused unless forced. `to` defaults to holding.on_fail while holding."""
        with self.store.locked():
            state = self.state()
            target = to or (self.settings.holding.on_fail if state.status == sm.Status.HOLDING else "previous")
            note = ""
            if state.status in (sm.Status.HOLDING, sm.Status.COMPLETE) and state.index >= 0:
                old = self.holding.check_old(force=True)
                if old is not None and not old.ready:
                    if not force:
                        return ActionResult(
                            action="refused",
                            state=self.view(state),
                            message=f"refused: old cannot serve ({old.state}: {old.reason}); rolling back would "
                            "send every request to it. Fix old first, or --force",
                        )
                    note = f" [forced: old was not ready: {old.reason}]"
            return self._roll_back(state, to=target, why=why + note)

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
        """One `watch` tick: roll back on a failed hard gate; advance on pass if asked; otherwise report. While
        holding: check old when due, close windows whose time is up, roll back on a failed hard gate."""
        with self.store.locked():
            state = self.state()
            if state.status == sm.Status.ABANDONED or state.index < 0:
                return ActionResult(
                    action="idle", state=self.view(state), message=f"nothing to watch ({state.status.value})"
                )
            if state.status == sm.Status.HOLDING:
                return self.holding.step(state, why=why, force=False)
            report = self.gate_report(state)
            if report.decision == "rollback":
                return self._auto_rollback(state, report)
            if report.decision == "advance" and auto_advance and state.next_stage() is not None:
                return self._advance(state, report, why=why)
            return ActionResult(
                action="hold" if report.decision == "hold" else "none",
                state=self.view(state),
                report=report,
                message=f"{report.stage}: {report.decision}",
            )


def _short_of_pass(report: GateReport) -> list[str]:
    """Every reason the report is not a pass: gates, custom gates, entry blockers."""
    return (
        [r.reason for r in report.results if r.verdict != "pass"]
        + [f"{c.name}: {c.reason}" for c in report.custom if c.verdict != "pass"]
        + report.blockers
        + [f"{i.id}: {i.reason}" for i in (report.entry.blocking if report.entry else [])]
        + judge_failures(report.judge)
    )
