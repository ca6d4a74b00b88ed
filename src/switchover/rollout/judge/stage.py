"""The judge in a rollout stage: judge every request since the stage was entered (not a sliding window: the tests
are valid over a growing sample) and fold its verdict into the stage's decision.

What the judge adds to today's gates: a regression beyond the floor rolls back (or holds, when not hard) even
while the gates still hold for samples; "no regression" on every measured test ends the stage early, passing the
error, fallback and latency-tail gates that only held for samples on a metric the judge cleared (a failed gate, a
shadow gate short of pass, a custom gate short of pass, or an entry blocker still holds).
Undecided changes nothing: the gates decide as before. Shadow-only stages are not judged (no new arm).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Literal

from switchover.config.rollout import GateName
from switchover.config.rollout_judge import JudgeConfig
from switchover.errors import BadInput
from switchover.rollout.custom_gates import CustomGateResult
from switchover.rollout.evidence import window_rows
from switchover.rollout.judge.panel import JudgeReport, judge_rows
from switchover.rollout.stages import RolloutState, Status
from switchover.rollout.verdicts import GateResult

StageDecision = Literal["advance", "hold", "rollback"]
COVERS: dict[GateName, str] = {
    GateName.ERROR_RATE: "error",
    GateName.FALLBACK_RATIO: "fallback",
    GateName.TTFT_P99_RATIO: "ttft_ms",
    GateName.TPOT_P99_RATIO: "tpot_ms",
}
"""The built-in gate whose hold (too few samples) a judge's 'no regression' on this metric may end early."""


def stage_judge(cfg: JudgeConfig, state: RolloutState, ledger: Callable[[], Path], now: float) -> JudgeReport | None:
    """The judge over the stage's requests so far; None when it is off or the stage has no new arm to judge."""
    stage = state.stage
    if not cfg.enabled or stage is None or stage.weight == 0 or state.status == Status.HOLDING:
        return None
    since = state.entered_at or 0.0
    try:
        rows = window_rows(ledger(), since, now)
        return judge_rows(rows, cfg, since=since)
    except BadInput as exc:  # no ledger to read: the judge is undecided, and says why
        return JudgeReport(verdict="undecided", decisions=[], since=since, notes=[f"judge: {exc}"])


def with_judge(
    decision: StageDecision,
    report: JudgeReport | None,
    cfg: JudgeConfig,
    *,
    results: Sequence[GateResult],
    custom: Sequence[CustomGateResult],
    blockers: Sequence[str],
) -> StageDecision:
    """The gates' decision, changed by a decisive judge (see the module's docstring)."""
    if report is None or decision == "rollback":
        return decision
    if report.verdict == "regress":
        return "rollback" if cfg.hard else "hold"
    if report.verdict == "ok" and cfg.end_early and decision == "hold":
        vouched = {d.metric for d in report.decisions if d.direction == "ok" and d.requests}
        gates_ok = all(r.verdict == "pass" or (r.verdict == "hold" and COVERS.get(r.gate) in vouched) for r in results)
        others_pass = all(c.verdict == "pass" for c in custom) and not blockers
        return "advance" if gates_ok and others_pass else decision
    return decision


def judge_failures(report: JudgeReport | None) -> list[str]:
    """The reasons of the regressions, for the audit line of a rollback."""
    return [f"judge: {d.reason}" for d in report.regressions] if report is not None else []
