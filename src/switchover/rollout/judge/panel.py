"""All the judge's tests on a stage's requests so far: one Decision per (metric, test), and what they add up to."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Literal

from pydantic import BaseModel, Field

from switchover.config.rollout_judge import LATENCY_METRICS, RATE_METRICS, JudgeConfig
from switchover.ledger_record import LedgerRow
from switchover.rollout.judge.decide import bulk_ratio, p99_ratio, rate_difference
from switchover.rollout.judge.models import Decision
from switchover.rollout.judge.streams import ArmStreams, arm_streams

Verdict = Literal["regress", "ok", "undecided"]
MIN_HALF = 30
"""Observations each tenant half of old needs before the A/A check behind a bulk-shift decision runs."""


class JudgeReport(BaseModel):
    """The judge at one tick: every decision, and the stage's verdict (any regression; all ok; else undecided)."""

    verdict: Verdict
    decisions: list[Decision]
    since: float | None = Field(default=None, description="Requests judged arrived at or after this (stage entry)")
    notes: list[str] = Field(default_factory=list)

    @property
    def regressions(self) -> list[Decision]:
        return [d for d in self.decisions if d.direction == "regress"]

    def audit(self) -> dict[str, str]:
        """Audit-log entries: 'judge METRIC TEST' -> 'fail | pass | hold (N requests)'."""
        word = {"regress": "fail", "ok": "pass", "undecided": "hold"}
        return {f"judge {d.metric} {d.test}": f"{word[d.direction]} ({d.requests} requests)" for d in self.decisions}


def judge_arms(old: ArmStreams, new: ArmStreams, cfg: JudgeConfig) -> list[Decision]:
    """Every configured metric's tests: latency gets the bulk shift and the p99 tail, output length a two-sided
    bulk shift, rates the rate difference."""
    out: list[Decision] = []
    for metric in cfg.metrics:
        a, b = old.array(metric), new.array(metric)
        if metric in LATENCY_METRICS:
            d = bulk_ratio(metric, a, b, floor=cfg.shift_floor, alpha=cfg.alpha)
            out.append(tenant_guard(d, old, cfg))
            out.append(p99_ratio(metric, a, b, floor=cfg.tail_floor, alpha=cfg.alpha))
        elif metric == "output_tokens":
            d = bulk_ratio(metric, a, b, floor=cfg.shift_floor, alpha=cfg.alpha, two_sided=True, counts=True)
            out.append(tenant_guard(d, old, cfg, counts=True))
        elif metric in RATE_METRICS:
            out.append(rate_difference(metric, a, b, floor=cfg.rate_floor, alpha=cfg.alpha))
    return out


def tenant_guard(d: Decision, old: ArmStreams, cfg: JudgeConfig, *, counts: bool = False) -> Decision:
    """The A/A check behind a bulk-shift decision: old's requests from even and from odd tenant buckets judged
    against each other (two-sided, same floor and alpha). The gateway routes by tenant, so the arms serve different
    tenants; when two halves of old's own tenants already differ beyond the floor, a difference between the arms may
    be the tenants', not the engines': the decision is held undecided, and says so."""
    if d.direction == "undecided":
        return d
    even, odd = old.tenant_halves(d.metric)
    if min(len(even), len(odd)) < MIN_HALF:
        return d
    aa = bulk_ratio(d.metric, even, odd, floor=cfg.shift_floor, alpha=cfg.alpha, two_sided=True, counts=counts)
    if aa.direction != "regress":
        return d
    effect = "-" if aa.effect is None else f"{aa.effect * 100:+.1f} %"
    why = (
        f"{d.reason}; held undecided: old's even and odd tenant buckets differ by {effect} "
        f"{aa.interval.text('ratio')}, beyond the floor, so the arms' difference may be their tenants'"
    )
    return d.model_copy(update={"direction": "undecided", "to_decision": None, "reason": why})


def verdict_of(decisions: list[Decision]) -> Verdict:
    """Any regression is a regression; every test of a metric measured on either arm ok is ok (a metric with no
    observations, e.g. invalid JSON when no request asked for JSON, cannot regress); anything else is undecided."""
    if any(d.direction == "regress" for d in decisions):
        return "regress"
    measured = [d for d in decisions if d.requests_old or d.requests_new]
    if measured and all(d.direction == "ok" for d in measured):
        return "ok"
    return "undecided"


def judge_rows(rows: Iterable[LedgerRow], cfg: JudgeConfig, *, since: float | None = None) -> JudgeReport:
    """The judge over ledger rows (a stage's, from its entry on)."""
    old, new = arm_streams(rows, cfg.max_pairs)
    decisions = judge_arms(old, new, cfg)
    notes = []
    unseen = [d.metric for d in decisions if d.requests_new == 0 and d.requests_old == 0]
    if unseen:
        notes.append(f"not measured in this stage's rows: {', '.join(sorted(set(unseen)))} (undecided)")
    if old.dropped or new.dropped:
        notes.append(f"more than {cfg.max_pairs:,} observations per metric: later ones were not judged")
    return JudgeReport(verdict=verdict_of(decisions), decisions=decisions, since=since, notes=notes)
