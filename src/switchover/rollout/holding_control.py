"""The holding window's edges, for the controller: old's scheduled readiness checks, prerequisites, the baseline
taken on entering 100 %, per-window evidence, and the state changes (window_end / holding_end / rollback)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from switchover.config.rollout import GateName
from switchover.config.rollout_custom import CustomGate
from switchover.config.rollout_holding import HoldingSettings
from switchover.rollout import stages as sm
from switchover.rollout.baseline import Baseline, take_baseline
from switchover.rollout.evidence import Window, judge_custom, read_window, window_rows, with_baseline
from switchover.rollout.gates import GateReport, WindowStats, evaluate
from switchover.rollout.holding import (
    HoldingReport,
    OldArmView,
    Prerequisite,
    ReadyRecord,
    WindowReport,
    check_due,
    close_windows,
    decide_holding,
    judge_old,
    judge_window,
    start_holding,
)
from switchover.rollout.rollback_ready import MetricsCheck, ReadyCheck, collect_prerequisites, record
from switchover.rollout.rows import TaskTyper
from switchover.rollout.stages import RolloutState, Transition
from switchover.rollout.store import BASELINE_FILE, HOLDING_FILE, OLD_READY_FILE, actor

if TYPE_CHECKING:
    from switchover.rollout.controller import ActionResult, Rollout

_BUILTIN = {g.value for g in GateName}


class HoldingDesk:
    """Everything the rollback window does for one Rollout."""

    def __init__(self, rollout: Rollout, *, ready: ReadyCheck, metrics: MetricsCheck) -> None:
        self.r = rollout
        self.ready = ready
        self.metrics = metrics

    @property
    def settings(self) -> HoldingSettings:
        return self.r.settings.holding

    def opens_at(self, state: RolloutState, index: int) -> bool:
        """Whether entering stage `index` opens the holding window (the last stage, at weight 100)."""
        stages = state.stages
        return self.settings.enabled and index == len(stages) - 1 and stages[index].weight == 100

    # --- old's readiness -------------------------------------------------------------------------------------
    @property
    def old_url(self) -> str:
        return self.settings.old.url or self.r.migration.old.url

    def records(self, since: float | None = None) -> list[ReadyRecord]:
        recs = self.r.store.read_lines(OLD_READY_FILE, ReadyRecord)
        return [x for x in recs if since is None or x.ts >= since]

    def check_old(self, *, force: bool = False) -> ReadyRecord | None:
        """Run the 1-token check of old when it is due (or now, when forced); the latest record."""
        recs = self.records()
        last = recs[-1] if recs else None
        now = self.r.clock()
        if not force and not check_due(last, now, self.settings.old.interval_s):
            return last
        cfg = self.settings.old
        res = self.ready(self.old_url, cfg.model or self.r.migration.old.model, cfg.max_ms)
        rec = record(res, now)
        self.r.store.append_line(OLD_READY_FILE, rec)
        return rec

    def old_view(self, state: RolloutState) -> OldArmView:
        since = state.holding.started_at if state.holding is not None else None
        recs = self.records(since) or self.records()[-1:]
        return judge_old(self.old_url, recs, self.r.clock(), self.settings.old.stale_after_s)

    def prerequisites(self, old: OldArmView) -> list[Prerequisite]:
        m = self.r.migration.old
        return collect_prerequisites(
            config_path=self.r.config_path,
            old_url=m.url,
            old_engine=m.engine.value,
            settings=self.settings,
            old=old,
            now=self.r.clock(),
            metrics=self.metrics,
        )

    def entry_blockers(self, state: RolloutState) -> list[str]:
        """Before the stage that opens the holding window: a fresh check of old, and every prerequisite."""
        if state.next_stage() is None or not self.opens_at(state, state.index + 1):
            return []
        self.check_old(force=True)
        pre = self.prerequisites(self.old_view(state))
        return [f"rollback prerequisite {p.name} {p.status}: {p.detail}" for p in pre if p.blocks]

    # --- entering --------------------------------------------------------------------------------------------
    def on_advance(self, new: RolloutState, tr: Transition) -> tuple[RolloutState, list[Transition]]:
        """After an advance into the 100 % last stage: keep a baseline of old, open the windows, audit it."""
        if not self.opens_at(new, new.index):
            return new, []
        now = self.r.clock()
        # the last stage's window, streamed (Prometheus as the source: no ledger rows, an empty baseline)
        rows = (
            window_rows(self.r.ledger_path(), tr.ts - self.r.settings.window_s, tr.ts)
            if self.r.settings.source == "ledger"
            else iter(())
        )
        baseline = take_baseline(
            rows, now=now, max_samples=self.settings.baseline_samples, typer=TaskTyper(self.r.settings.task_types)
        )
        self.r.store.write_model(BASELINE_FILE, baseline)
        holding = start_holding(self.settings, now)
        windows = ", ".join(f"{k.value} {w.duration_s / 3600:g} h" for k, w in self.settings.windows.items())
        line = Transition(
            ts=now,
            who=actor(),
            action="holding_start",
            from_stage=new.stage_name,
            to_stage=new.stage_name,
            from_weight=new.weight,
            to_weight=new.weight,
            why=f"rollback window opened (old kept warm): {windows}; baseline of old from {baseline.ttft_n} answers",
        )
        return sm.enter_holding(new, holding), [line]

    # --- judging ---------------------------------------------------------------------------------------------
    def baseline(self) -> Baseline | None:
        return self.r.store.read_model(BASELINE_FILE, Baseline)

    def last_report(self) -> HoldingReport | None:
        return self.r.store.read_model(HOLDING_FILE, HoldingReport)

    def report(self, state: RolloutState) -> tuple[HoldingReport, WindowStats]:
        """Every window judged now (writes holding.json for `check` and `report`)."""
        assert state.holding is not None
        self.check_old()  # the schedule: only when due
        now = self.r.clock()
        old = self.old_view(state)
        baseline = self.baseline()
        th = self.r.settings.gates
        cache: dict[float, Window] = {}
        main_stats: WindowStats | None = None
        reports: list[WindowReport] = []
        plan = []
        by_eval: dict[float, dict[str, CustomGate]] = {}  # the custom gates judged on each evaluation window
        for ftype, ws in state.holding.windows.items():
            spec = self.settings.windows.get(ftype)
            names = spec.gates if spec else []
            custom = [self.r.settings.custom_gate(g) for g in names if g not in _BUILTIN]
            eval_s = (spec.eval_window_s if spec else None) or self.r.settings.window_s
            if ws.closed_at is None:
                by_eval.setdefault(eval_s, {}).update((g.name, g) for g in custom)
            plan.append((ftype, ws, spec, names, custom, eval_s))
        for ftype, ws, spec, names, custom, eval_s in plan:
            duration = spec.duration_s if spec else ws.ends_at - state.holding.started_at
            builtin = [GateName(g) for g in names if g in _BUILTIN]
            if ws.closed_at is not None:
                reports.append(judge_window(ftype, duration, ws, [], [], old, now))
                continue
            if eval_s not in cache:  # one read per evaluation window, for every gate judged on it
                since = max(now - eval_s, state.holding.started_at)
                cache[eval_s] = read_window(
                    self.r.settings,
                    self.r.ledger_path,
                    since=since,
                    now=now,
                    with_shadow=False,
                    gates=list(by_eval[eval_s].values()),
                )
            window = cache[eval_s]
            stats = with_baseline(window.stats, baseline, th.min_samples)
            main_stats = main_stats or stats
            results = evaluate(stats, builtin, th)
            customs = judge_custom(
                custom,
                self.r.settings,
                window,
                baseline=baseline,
                since_switch=self.r.rows_since_switch,
                query=self.r.query,
                review=self.r.review_summary,
            )
            reports.append(judge_window(ftype, duration, ws, results, customs, old, now))
        pre = self.prerequisites(old)
        report = decide_holding(state.holding, reports, old, pre)
        self.r.store.write_model(HOLDING_FILE, report)
        stats = main_stats or WindowStats(source=self.r.settings.source, window_s=0, notes=["every window closed"])
        return report, stats

    def gate_report(self, state: RolloutState) -> GateReport:
        """The holding report in the shape every rollout command prints."""
        report, stats = self.report(state)
        open_ = [w for w in report.windows if w.status != "closed"]
        decision = {"rollback": "rollback", "end": "advance"}.get(report.decision, "hold")
        return GateReport(
            stage=state.stage_name,
            decision=decision,  # type: ignore[arg-type]
            results=[g for w in open_ for g in w.gates],
            custom=[c for w in open_ for c in w.custom],
            stats=stats,
            holding=report,
            blockers=[report.reason] if report.decision in ("hold", "rollback_blocked") else [],
        )

    # --- acting ----------------------------------------------------------------------------------------------
    def step(self, state: RolloutState, *, why: str, force: bool) -> ActionResult:
        """One holding check: old when due; roll back on a failed hard gate (if old can serve); close the windows
        whose time is up; end the holding when none is left (or at once with force, recorded)."""
        from switchover.rollout.controller import ActionResult

        assert state.holding is not None
        self.check_old()
        report = self.gate_report(state)
        hr = report.holding
        assert hr is not None
        if hr.decision == "rollback":
            return self.r._auto_rollback(state, report, to=self.settings.on_fail)
        if hr.decision == "rollback_blocked":
            return ActionResult(
                action="rollback_blocked",
                state=self.r.view(state),
                report=report,
                message=f"ROLLBACK BLOCKED: {hr.reason}",
            )
        now = self.r.clock()
        closing = list(hr.closing)
        forced = force and hr.decision == "hold"
        if forced:
            closing = [w.failure_type for w in hr.windows if w.status != "closed"]
        lines = [
            self._line(
                "window_end",
                state,
                now,
                f"{ftype.value} window closed" + (f" early by hand: {why}" if forced else ""),
                report.summary(),
                window=ftype.value,
            )
            for ftype in closing
        ]
        holding = close_windows(state.holding, closing, now)
        new = sm.update_holding(state, holding) if closing else state
        if holding.ended_at is not None:
            text = f"rollback window ended: {why}" + (" [forced before every window passed]" if forced else "")
            lines.append(self._line("holding_end", state, now, text, report.summary()))
        if lines:
            self.r.store.save(new)
            for line in lines:
                self.r.store.append(line)
        if holding.ended_at is not None:
            return ActionResult(
                action="holding_end",
                state=self.r.view(new),
                report=report,
                transitions=lines,
                transition=lines[-1],
                message="holding ended: old may be retired",
            )
        closed = f"closed {', '.join(f.value for f in closing)}; " if closing else ""
        return ActionResult(
            action="hold",
            state=self.r.view(new),
            report=report,
            transitions=lines,
            message=f"holding: {closed}{hr.reason}",
        )

    def _line(
        self, action: str, state: RolloutState, now: float, why: str, gates: dict[str, str], window: str | None = None
    ) -> Transition:
        data: dict[str, Any] = dict(
            ts=now,
            who=actor(),
            action=action,
            from_stage=state.stage_name,
            to_stage=state.stage_name,
            from_weight=state.weight,
            to_weight=state.weight,
            why=why,
            gates=gates,
            window=window,
        )
        return Transition(**data)
