"""Stage gates: evidence from the gateway's ledger (seconds old) or from Prometheus, judged pass/hold/fail.

Too few samples is "hold", never "pass". A count-based gate may still "fail" early when the failures seen
already exceed what min_samples requests could absorb: then no outcome of the missing requests could make
it pass. A failed hard gate means roll back; a failed soft gate only holds.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Sequence
from typing import Any, Literal

from pydantic import BaseModel, Field, computed_field

from switchover.config.rollout import GateName, GateThresholds
from switchover.ledger_files import LedgerSkips
from switchover.ledger_record import ARM_ERROR_OUTCOMES, CLIENT_OUTCOMES, NOT_AN_ARM_OUTCOMES, LedgerRecord, LedgerRow
from switchover.measure.percentiles import percentile
from switchover.rollout.compare import ComparisonReport, compare_samples, samples_from_ledger
from switchover.rollout.custom_gates import CustomGateResult
from switchover.rollout.entry import EntryReport
from switchover.rollout.holding import HoldingReport
from switchover.rollout.judge.panel import JudgeReport
from switchover.rollout.verdicts import GateResult, GateVerdict

__all__ = ["GateResult", "GateVerdict"]

Decision = Literal["advance", "hold", "rollback"]


class ArmWindow(BaseModel):
    """What one arm did in the window."""

    requests: int = 0
    errors: int = 0
    fallbacks: int = 0
    ttft_p99_ms: float | None = None
    ttft_n: int = 0
    tpot_p99_ms: float | None = None
    tpot_n: int = 0


class WindowStats(BaseModel):
    """The evidence the gates judge."""

    source: Literal["ledger", "prometheus"]
    window_s: float
    start: float | None = None
    end: float | None = None
    old: ArmWindow = Field(default_factory=ArmWindow)
    new: ArmWindow = Field(default_factory=ArmWindow)
    shadow: ComparisonReport | None = None
    client_errors: int = Field(default=0, description="Answered by the gateway itself (CLIENT_OUTCOMES)")
    client_disconnects: int = Field(default=0, description="Requests whose client went away")
    drain_cutoffs: int = Field(default=0, description="Responses cut off by the drain limit at shutdown")
    gateway_errors: int = Field(default=0, description="Requests that failed inside the gateway itself (500)")
    unrouted: int = Field(default=0, description="Request rows without a routed arm (other outcomes)")
    ledger_bad_lines: int = Field(default=0, description="Ledger lines that could not be read and were skipped")
    ledger_torn_lines: int = Field(default=0, description="A last line still being written (normal), skipped")
    notes: list[str] = Field(default_factory=list)
    warnings: list[str] = Field(default_factory=list, description="What an operator should look at")


class GateReport(BaseModel):
    """Every gate of a stage, and what follows: advance, hold or roll back."""

    stage: str
    decision: Decision
    results: list[GateResult]
    stats: WindowStats
    blockers: list[str] = Field(default_factory=list, description="Entry conditions of the next stage not met")
    custom: list[CustomGateResult] = Field(default_factory=list, description="rollout.custom_gates of the stage")
    holding: HoldingReport | None = Field(default=None, description="The rollback window, while holding")
    entry: EntryReport | None = Field(
        default=None, description="Evidence the next stage needs before it is entered (rollout/entry.py)"
    )
    judge: JudgeReport | None = Field(
        default=None, description="The anytime-valid judge over the stage's requests so far (rollout/judge/)"
    )

    @computed_field  # type: ignore[prop-decorator]
    @property
    def ledger_bad_lines(self) -> int:
        """Ledger lines skipped as unreadable (also in stats; here so --json shows it at the top)."""
        return self.stats.ledger_bad_lines

    def summary(self) -> dict[str, str]:
        out: dict[str, str] = {r.gate.value: r.verdict for r in self.results}
        return out | {c.name: c.verdict for c in self.custom} | (self.judge.audit() if self.judge else {})


def _count_gate(gate: GateName, bad: int, n: int, limit: float, min_samples: int, hard: bool, what: str) -> GateResult:
    base: dict[str, Any] = dict(gate=gate, hard=hard, threshold=limit, samples=n)
    if n >= min_samples:
        rate = bad / n
        verdict: GateVerdict = "fail" if rate > limit else "pass"
        return GateResult(
            **base,
            verdict=verdict,
            observed=rate,
            reason=f"{what} {bad}/{n} = {rate:.2%} {'>' if verdict == 'fail' else '≤'} {limit:.2%}",
        )
    if bad > limit * min_samples:
        return GateResult(
            **base,
            verdict="fail",
            observed=bad / n if n else None,
            reason=f"{what} {bad} of {n} already exceeds {limit:.2%} of the {min_samples} needed",
        )
    return GateResult(
        **base,
        verdict="hold",
        observed=bad / n if n else None,
        reason=f"{n} new-arm requests, {min_samples} needed ({what} so far {bad})",
    )


def _ratio_gate(
    gate: GateName,
    old_p: float | None,
    old_n: int,
    new_p: float | None,
    new_n: int,
    limit: float,
    min_samples: int,
    hard: bool,
    what: str,
) -> GateResult:
    base: dict[str, Any] = dict(gate=gate, hard=hard, threshold=limit, samples=min(old_n, new_n))
    if old_n < min_samples or new_n < min_samples or old_p is None or new_p is None:
        return GateResult(
            **base, verdict="hold", reason=f"{what}: old {old_n} / new {new_n} samples, {min_samples} each needed"
        )
    if old_p <= 0:
        return GateResult(**base, verdict="hold", reason=f"{what}: old p99 is {old_p:g} ms, no ratio")
    ratio = new_p / old_p
    verdict: GateVerdict = "fail" if ratio > limit else "pass"
    return GateResult(
        **base,
        verdict=verdict,
        observed=ratio,
        reason=f"{what} p99 new {new_p:.1f} ms / old {old_p:.1f} ms = {ratio:.2f} "
        f"{'>' if verdict == 'fail' else '≤'} {limit:g}",
    )


def _shadow_gate(report: ComparisonReport | None, hard: bool, th: GateThresholds) -> GateResult:
    base: dict[str, Any] = dict(gate=GateName.SHADOW_DISTRIBUTION, hard=hard, threshold=th.alpha)
    if report is None:
        return GateResult(**base, verdict="hold", samples=0, reason="no shadow comparison available")
    judged = set(th.shadow_metrics)
    report = report.model_copy(update={"metrics": [m for m in report.metrics if m.metric in judged]})
    measured = [m for m in report.metrics if m.n_old or m.n_new]
    samples = min((m.n_old for m in measured), default=0)
    if report.differs:
        details = "; ".join(f"{m.metric}: {m.reason}" for m in report.metrics if m.verdict == "differs")
        return GateResult(
            **base,
            verdict="fail",
            samples=samples,
            observed=float(len(report.differs)),
            reason=f"shadow differs beyond the A/A noise in {', '.join(report.differs)} ({details})",
        )
    short = [m for m in measured if m.verdict == "insufficient"]
    if short or not measured:
        names = ", ".join(f"{m.metric} ({m.n_old}/{m.n_new})" for m in short) or "every metric"
        return GateResult(
            **base,
            verdict="hold",
            samples=samples,
            reason=f"too few shadow samples for {names}; {th.min_samples} per side needed",
        )
    unmeasured = [m.metric for m in report.metrics if not (m.n_old or m.n_new)]
    extra = f" (not measured: {', '.join(unmeasured)})" if unmeasured else ""
    return GateResult(
        **base, verdict="pass", samples=samples, observed=0.0, reason=f"no metric differs beyond the A/A noise{extra}"
    )


def evaluate(stats: WindowStats, gates: Iterable[GateName], th: GateThresholds) -> list[GateResult]:
    """Judge each gate on the window (pure)."""
    out = []
    for gate in gates:
        hard = gate not in th.soft
        if gate == GateName.ERROR_RATE:
            out.append(
                _count_gate(
                    gate, stats.new.errors, stats.new.requests, th.max_error_rate, th.min_samples, hard, "errors"
                )
            )
        elif gate == GateName.FALLBACK_RATIO:
            out.append(
                _count_gate(
                    gate,
                    stats.new.fallbacks,
                    stats.new.requests,
                    th.max_fallback_ratio,
                    th.min_samples,
                    hard,
                    "fallbacks",
                )
            )
        elif gate == GateName.TTFT_P99_RATIO:
            out.append(
                _ratio_gate(
                    gate,
                    stats.old.ttft_p99_ms,
                    stats.old.ttft_n,
                    stats.new.ttft_p99_ms,
                    stats.new.ttft_n,
                    th.max_ttft_p99_ratio,
                    th.min_samples,
                    hard,
                    "TTFT",
                )
            )
        elif gate == GateName.TPOT_P99_RATIO:
            out.append(
                _ratio_gate(
                    gate,
                    stats.old.tpot_p99_ms,
                    stats.old.tpot_n,
                    stats.new.tpot_p99_ms,
                    stats.new.tpot_n,
                    th.max_tpot_p99_ratio,
                    th.min_samples,
                    hard,
                    "TPOT",
                )
            )
        elif gate == GateName.SHADOW_DISTRIBUTION:
            out.append(_shadow_gate(stats.shadow, hard, th))
    return out


def decide(
    results: list[GateResult], blockers: list[str] | None = None, custom: Sequence[CustomGateResult] = ()
) -> Decision:
    """Any failed hard gate: roll back. Else anything short of pass (or an entry blocker): hold."""
    verdicts = [(r.verdict, r.hard) for r in results] + [(c.verdict, c.hard) for c in custom]
    if any(v == "fail" and hard for v, hard in verdicts):
        return "rollback"
    if blockers or any(v != "pass" for v, _ in verdicts):
        return "hold"
    return "advance"


def _p99(values: list[float]) -> float | None:
    return percentile(values, 99) if values else None


def _excluded_notes(stats: WindowStats, by_outcome: Counter[str]) -> None:
    """Say what was left out of both arms, and why."""
    if stats.client_errors:
        parts = ", ".join(f"{o} {by_outcome[o]}" for o in sorted(CLIENT_OUTCOMES) if by_outcome[o])
        stats.notes.append(
            f"{stats.client_errors} requests the gateway answered itself ({parts}) are not counted against either arm"
        )
    if stats.client_disconnects:
        stats.notes.append(f"{stats.client_disconnects} requests whose client went away are not counted")
    if stats.drain_cutoffs:
        stats.notes.append(
            f"{stats.drain_cutoffs} responses cut off by the drain limit at shutdown are not counted against either arm"
        )
    if stats.unrouted:
        stats.notes.append(f"{stats.unrouted} request rows without a routed arm were skipped")
    if stats.gateway_errors:
        stats.warnings.append(
            f"{stats.gateway_errors} requests failed inside the gateway itself (gateway_error, 500): not counted "
            "against either arm; look at the gateway's log"
        )


def stats_from_ledger(
    rows: Iterable[LedgerRow],
    *,
    window_s: float,
    with_shadow: bool,
    th: GateThresholds,
    skipped: LedgerSkips | None = None,
) -> WindowStats:
    """Per-arm counts and tails of the request rows (outcomes that say nothing about an arm left out), and
    (for shadow stages) the shadow-vs-old comparison. One pass over `rows` (a stream will do): it keeps the
    latencies the p99s need and, for shadow stages, the rows that carry a mirror's result; not every row."""
    old, new = ArmWindow(), ArmWindow()
    start: float | None = None
    end: float | None = None
    mirrored: list[LedgerRow] = []  # all samples_from_ledger(..., "shadow") looks at
    lat: dict[str, dict[str, list[float]]] = {"old": {"ttft": [], "tpot": []}, "new": {"ttft": [], "tpot": []}}
    by_outcome: Counter[str] = Counter()
    unrouted = 0
    for r in rows:
        start = r.ts if start is None or r.ts < start else start
        end = r.ts if end is None or r.ts > end else end
        if with_shadow and r.shadow is not None:
            mirrored.append(r)
        if not isinstance(r, LedgerRecord):
            continue
        if r.outcome in NOT_AN_ARM_OUTCOMES:
            by_outcome[r.outcome] += 1
            continue
        if r.routed is None:
            unrouted += 1
            continue
        arm = new if r.routed == "new" else old
        arm.requests += 1
        if r.outcome in ARM_ERROR_OUTCOMES:
            arm.errors += 1
        elif r.outcome == "fallback_ok":
            arm.fallbacks += 1
        elif r.outcome == "ok" and r.arm == r.routed:
            if r.ttft_ms is not None:
                lat[r.routed]["ttft"].append(r.ttft_ms)
            if r.tpot_ms is not None:
                lat[r.routed]["tpot"].append(r.tpot_ms)
    for name, arm in (("old", old), ("new", new)):
        arm.ttft_n, arm.ttft_p99_ms = len(lat[name]["ttft"]), _p99(lat[name]["ttft"])
        arm.tpot_n, arm.tpot_p99_ms = len(lat[name]["tpot"]), _p99(lat[name]["tpot"])
    skips = skipped or LedgerSkips()  # complete now: the stream has been read to its end
    bad_note = skips.note()
    shadow = None
    if with_shadow:
        a, b = samples_from_ledger(mirrored, "shadow")
        shadow = compare_samples(
            a, b, mode="shadow", alpha=th.alpha, noise_margin=th.noise_margin, min_samples=th.min_samples
        )
        shadow.ledger_bad_lines = skips.bad_lines
        shadow.notes.extend([bad_note] if bad_note else [])
    stats = WindowStats(
        source="ledger",
        window_s=window_s,
        start=start,
        end=end,
        old=old,
        new=new,
        shadow=shadow,
        client_errors=sum(by_outcome[o] for o in CLIENT_OUTCOMES),
        client_disconnects=by_outcome["client_disconnected"],
        drain_cutoffs=by_outcome["drain_cutoff"],
        gateway_errors=by_outcome["gateway_error"],
        unrouted=unrouted,
        ledger_bad_lines=skips.bad_lines,
        ledger_torn_lines=skips.torn_tail,
    )
    _excluded_notes(stats, by_outcome)
    if bad_note:
        stats.warnings.append(bad_note)
    return stats
