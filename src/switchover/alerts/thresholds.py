"""Thresholds a rule compares with a latency distribution or an engine-state series: tuned to the old engine, they
need the measured shift (latency) or a re-baseline (engine state) on the new one."""

from __future__ import annotations

from switchover.alerts.mapping import SeriesRef
from switchover.alerts.report import Threshold
from switchover.alerts.shift import BenchShifts

# intents whose thresholds were tuned to the old engine's distribution (latency, queueing) or its state counters
LATENCY_INTENTS = frozenset({"ttft", "tpot", "itl", "e2e", "queue_time"})
ENGINE_STATE_INTENTS = frozenset({"running", "waiting", "kv_usage", "preemptions"})


def thresholds(
    group: str,
    rule: str,
    found: list[tuple[str, float]],
    quantiles: list[float],
    refs: list[tuple[str, SeriesRef]],
    shifts: BenchShifts | None,
    same_engine: bool = False,
) -> list[Threshold]:
    """Each (intent, number) a rule compares with, with the shift a bench run measured for it when given."""
    out = []
    seen: set[tuple[str, float]] = set()
    q = quantiles[0] if quantiles else None
    for metric, ref in refs:
        if ref.intent not in LATENCY_INTENTS | ENGINE_STATE_INTENTS:
            continue
        for comparison, value in found:
            if (ref.intent, value) in seen or value == 0:  # == 0 / > 0 are presence checks, not tuned levels
                continue
            seen.add((ref.intent, value))
            th = Threshold(
                group=group,
                rule=rule,
                intent=ref.intent,
                metric=metric,
                comparison=comparison,
                value=value,
                quantile=q if ref.spec.type == "histogram" else None,
            )
            if ref.intent in ENGINE_STATE_INTENTS and same_engine:
                th.note = "engine state (batch, queue, KV use) may count differently after the upgrade: re-check it"
            elif ref.intent in ENGINE_STATE_INTENTS:
                th.note = "engine state (batch, queue, KV use) means different things per engine: re-baseline it"
            elif shifts is None:
                th.note = "tuned to the old engine's distribution: pass --bench RUN_DIR for the measured shift"
            else:
                shift = shifts.shift(ref.intent, th.quantile)
                if shift is None:
                    th.note = f"the bench run has no {ref.intent} measurement to shift it by"
                else:
                    th.shift = shift
                    th.suggested = value * shift.median
                    th.suggested_range = (value * shift.low, value * shift.high)
                    th.note = (
                        f"new/old {shift.stat} ×{shift.median:.2f} (×{shift.low:.2f}–×{shift.high:.2f} over "
                        f"{len(shift.steps)} steps)"
                    )
            out.append(th)
    return out
