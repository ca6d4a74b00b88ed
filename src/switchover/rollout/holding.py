"""The rollback window after 100 % as pure functions: windows per failure type, old-arm readiness, prerequisites.

`holding` starts when the rollout enters its last stage at weight 100. Each failure type's window (config/
rollout_holding.py) has an end time and gates. On every check:
  * a failed hard gate in an open window → roll back (to `holding.on_fail`), but only while old can serve: if
    the last readiness check of old failed or is stale, the decision is `rollback_blocked` (sending everything
    to an engine that cannot answer would turn a regression into an outage) and the report says so;
  * a window whose time is up closes when its gates pass and old is ready at that moment; otherwise it stays
    open (`extended`) with the reason;
  * when every window has closed the holding ends (audit line `holding_end`): old may be retired.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from switchover.config.rollout_holding import DrillRequirement, FailureType, HoldingSettings
from switchover.evidence.drill import DrillResult
from switchover.rollout.custom_gates import CustomGateResult
from switchover.rollout.verdicts import GateResult
from switchover.wire.readiness import READY_STATES, ElapsedMs

Verdict = Literal["pass", "hold", "fail"]
HoldingDecision = Literal["hold", "rollback", "rollback_blocked", "end"]
PrereqStatus = Literal["ok", "failed", "missing", "unverified"]


class WindowState(BaseModel):
    """One failure type's window, as kept in state.json."""

    model_config = ConfigDict(allow_inf_nan=False)

    ends_at: float
    closed_at: float | None = None


class HoldingState(BaseModel):
    """The rollback window, as kept in state.json."""

    model_config = ConfigDict(allow_inf_nan=False)

    started_at: float
    windows: dict[FailureType, WindowState] = Field(min_length=1)  # a holding has at least one window
    ended_at: float | None = None

    @property
    def open_windows(self) -> list[FailureType]:
        return [k for k, w in self.windows.items() if w.closed_at is None]

    @property
    def ends_at(self) -> float:
        """When the last window is due to end (it may stay open longer)."""
        return max(w.ends_at for w in self.windows.values())


def start_holding(settings: HoldingSettings, now: float) -> HoldingState:
    """A fresh holding window starting `now`."""
    return HoldingState(
        started_at=now, windows={k: WindowState(ends_at=now + w.duration_s) for k, w in settings.windows.items()}
    )


class ReadyRecord(BaseModel):
    """One scheduled readiness check of old (a line of old_ready.jsonl)."""

    ts: float = Field(description="Wall-clock time of the check")
    url: str
    ready: bool
    state: str = Field(description=READY_STATES)
    reason: str = Field(description="One line, for humans")
    elapsed_ms: ElapsedMs = None


class OldArmView(BaseModel):
    """Can old take the traffic back right now? Its readiness is a gate of the holding window."""

    url: str
    verdict: Verdict = Field(
        description="pass: the latest check is fresh and ready; fail: it was not ready; hold: "
        "no check yet, or the latest is stale"
    )
    at_risk: bool = Field(description="Old is not known to be able to take the traffic back (verdict is not pass)")
    reason: str
    last: ReadyRecord | None = Field(default=None, description="The latest check; None: old was never checked")
    age_s: float | None = Field(default=None, description="Seconds since the latest check; None: never checked")
    checks: int = Field(
        default=0,
        description="Checks since holding started (before holding: all of them; none that recent: the latest alone)",
    )
    failures: int = Field(default=0, description="Failed checks since holding started")


def check_due(last: ReadyRecord | None, now: float, interval_s: float) -> bool:
    """Whether the scheduled readiness check of old is due."""
    return last is None or now - last.ts >= interval_s


def judge_old(url: str, records: list[ReadyRecord], now: float, stale_after_s: float) -> OldArmView:
    """pass: the latest check is fresh and ready; fail: it was not ready; hold: no fresh check."""
    last = records[-1] if records else None
    failures = sum(1 for r in records if not r.ready)
    base: dict[str, Any] = dict(url=url, last=last, checks=len(records), failures=failures)
    if last is None:
        return OldArmView(**base, verdict="hold", at_risk=True, reason="old has not been checked yet")
    age = now - last.ts
    if not last.ready:
        return OldArmView(
            **base,
            age_s=age,
            verdict="fail",
            at_risk=True,
            reason=f"old cannot serve ({last.state}: {last.reason}); the rollback window is at risk",
        )
    if age > stale_after_s:
        return OldArmView(
            **base,
            age_s=age,
            verdict="hold",
            at_risk=True,
            reason=f"last check of old is {age:.0f} s old (stale after {stale_after_s:g} s)",
        )
    return OldArmView(**base, age_s=age, verdict="pass", at_risk=False, reason=f"old ready: {last.reason}")


class Prerequisite(BaseModel):
    """One thing a rollback needs (docs/checklist.md#rollout.rollback), checked."""

    name: Literal["config", "weights", "route", "monitoring", "drill", "old_ready"]
    status: PrereqStatus
    detail: str
    required: bool = True

    @property
    def blocks(self) -> bool:
        return self.required and self.status in ("failed", "missing")


def judge_drill(found: tuple[str, DrillResult] | None, now: float, req: DrillRequirement) -> Prerequisite:
    """The latest drill as a prerequisite: recent, recovered, within the acceptable outage."""
    if found is None:
        return Prerequisite(
            name="drill",
            status="missing",
            required=req.required,
            detail=f"no drill.json under {req.runs}: run `switchover drill` (time the rollback once)",
        )
    path, d = found
    age = now - d.started_wall
    if age > req.max_age_s:
        return Prerequisite(
            name="drill",
            status="missing",
            required=req.required,
            detail=f"the last drill ({path}) is {age / 86400:.1f} days old, over "
            f"{req.max_age_s / 86400:g}: run it again",
        )
    if not d.ok or d.recovery_s is None:
        return Prerequisite(
            name="drill",
            status="failed",
            required=req.required,
            detail=f"the last drill did not recover: {d.reason} ({path})",
        )
    budget = req.max_recovery_s if req.max_recovery_s is not None else d.max_recovery_s
    if budget is not None and d.recovery_s > budget:
        return Prerequisite(
            name="drill",
            status="failed",
            required=req.required,
            detail=f"recovery {d.recovery_s:.2f} s > acceptable {budget:g} s ({path})",
        )
    within = f", within {budget:g} s" if budget is not None else ""
    return Prerequisite(
        name="drill",
        status="ok",
        required=req.required,
        detail=f"first good answer on old {d.recovery_s:.2f} s after stopping new{within} ({path})",
    )


class WindowReport(BaseModel):
    """One failure type's window: its gates now, and whether it is open, closing, extended or closed."""

    failure_type: FailureType
    duration_s: float
    ends_at: float
    remaining_s: float
    status: Literal["open", "closing", "extended", "closed"]
    closed_at: float | None = None
    unwatched: bool = Field(default=False, description="No gate watches this failure type: it closes on time")
    gates: list[GateResult] = Field(default_factory=list)
    custom: list[CustomGateResult] = Field(default_factory=list)
    failed: list[str] = Field(default_factory=list, description="Hard gates that failed (a rollback)")
    reason: str = ""

    def verdicts(self) -> list[tuple[str, Verdict, bool]]:
        """(name, verdict, hard) of every gate of the window."""
        return [(g.gate.value, g.verdict, g.hard) for g in self.gates] + [
            (c.name, c.verdict, c.hard) for c in self.custom
        ]


class HoldingReport(BaseModel):
    """The rollback window at a glance: windows, old's readiness, prerequisites, the decision."""

    started_at: float
    ends_at: float
    ended_at: float | None = None
    decision: HoldingDecision
    at_risk: bool
    windows: list[WindowReport]
    old: OldArmView
    prerequisites: list[Prerequisite] = Field(default_factory=list)
    closing: list[FailureType] = Field(default_factory=list, description="Windows that close with this check")
    reason: str = ""
    warnings: list[str] = Field(default_factory=list)


def judge_window(
    ftype: FailureType,
    duration_s: float,
    ws: WindowState,
    gates: list[GateResult],
    custom: list[CustomGateResult],
    old: OldArmView,
    now: float,
) -> WindowReport:
    """One window's status (pure): closed stays closed; a due window closes only on all-pass with old ready."""
    base: dict[str, Any] = dict(
        failure_type=ftype,
        duration_s=duration_s,
        ends_at=ws.ends_at,
        remaining_s=max(0.0, ws.ends_at - now),
        closed_at=ws.closed_at,
        gates=gates,
        custom=custom,
        unwatched=not gates and not custom,
    )
    if ws.closed_at is not None:
        return WindowReport(**base, status="closed", reason="closed")
    report = WindowReport(**base, status="open")
    failed = [n for n, v, hard in report.verdicts() if v == "fail" and hard]
    if failed:
        return report.model_copy(update={"failed": failed, "reason": f"hard gate failed: {', '.join(failed)}"})
    if now < ws.ends_at:
        return report.model_copy(update={"reason": f"{ws.ends_at - now:.0f} s left"})
    short = [f"{n} ({v})" for n, v, _ in report.verdicts() if v != "pass"]
    if short:
        return report.model_copy(
            update={"status": "extended", "reason": "time is up but not every gate passes: " + ", ".join(short)}
        )
    if old.verdict != "pass":
        return report.model_copy(
            update={"status": "extended", "reason": f"time is up but old is not known to be ready ({old.reason})"}
        )
    why = "time is up, nothing watched it (closes on time alone)" if report.unwatched else "time is up, gates pass"
    return report.model_copy(update={"status": "closing", "reason": why})


def decide_holding(
    state: HoldingState, windows: list[WindowReport], old: OldArmView, prerequisites: list[Prerequisite]
) -> HoldingReport:
    """Roll back (if old can serve), keep holding, or end the holding window (pure)."""
    failed = [(w.failure_type, w.reason) for w in windows if w.failed]
    closing = [w.failure_type for w in windows if w.status == "closing"]
    open_after = [w for w in windows if w.status in ("open", "extended")]
    warnings = []
    unwatched = [w.failure_type.value for w in windows if w.unwatched and w.status != "closed"]
    if unwatched:
        warnings.append(
            f"no gate watches {', '.join(unwatched)}: those windows close on time alone "
            "(add a custom gate or the spot-check rating gate)"
        )
    if old.at_risk:
        warnings.append(f"rollback window at risk: {old.reason}")
    warnings += [f"rollback prerequisite {p.name}: {p.status}: {p.detail}" for p in prerequisites if p.status != "ok"]
    base: dict[str, Any] = dict(
        started_at=state.started_at,
        ends_at=state.ends_at,
        ended_at=state.ended_at,
        at_risk=old.at_risk,
        windows=windows,
        old=old,
        prerequisites=prerequisites,
        warnings=warnings,
    )
    if failed:
        what = "; ".join(f"{t.value}: {r}" for t, r in failed)
        if old.verdict != "pass":
            return HoldingReport(
                **base,
                decision="rollback_blocked",
                reason=f"{what}; but old cannot take the traffic back ({old.reason})",
            )
        return HoldingReport(**base, decision="rollback", reason=what)
    if not open_after:
        return HoldingReport(
            **base, decision="end", closing=closing, reason="every failure type's window has closed: old may be retired"
        )
    left = ", ".join(f"{w.failure_type.value} ({w.reason})" for w in open_after)
    return HoldingReport(**base, decision="hold", closing=closing, reason=f"holding: {left}")


def close_windows(state: HoldingState, closing: list[FailureType], now: float) -> HoldingState:
    """`state` with the given windows closed at `now` (and ended when none is left open)."""
    windows = {k: (w.model_copy(update={"closed_at": now}) if k in closing else w) for k, w in state.windows.items()}
    ended = now if all(w.closed_at is not None for w in windows.values()) else state.ended_at
    return state.model_copy(update={"windows": windows, "ended_at": ended})
