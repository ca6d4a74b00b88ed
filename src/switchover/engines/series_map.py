"""Which of one engine's Prometheus series can be produced from another engine's, matched by intent (ttft, e2e,
running, ...) with the names, types and units of their profiles: what `switchover metrics-adapter` serves and
`alerts translate --mode adapter` reads."""

from __future__ import annotations

from dataclasses import dataclass, field

from switchover.engines.profile import EngineProfile, MetricSpec

# factor to multiply a source value by to express it in the target unit
_UNIT_FACTORS: dict[tuple[str, str], float] = {
    ("seconds", "milliseconds"): 1000.0,
    ("milliseconds", "seconds"): 0.001,
    ("ratio", "percent"): 100.0,
    ("percent", "ratio"): 0.01,
}


@dataclass(frozen=True)
class Mapping:
    """How one intent goes from the source engine's series to the target's."""

    intent: str
    src: MetricSpec
    dst: MetricSpec
    factor: float


@dataclass
class Plan:
    """The series the adapter serves (one mapping per intent) and why each other target intent is not served."""

    mappings: list[Mapping] = field(default_factory=list)
    skipped: dict[str, str] = field(default_factory=dict)  # intent -> why it is not served


def unit_factor(src: str, dst: str) -> float | None:
    """The factor from unit `src` to unit `dst`; None when one cannot be converted to the other."""
    if src == dst:
        return 1.0
    return _UNIT_FACTORS.get((src, dst))


def plan(src: EngineProfile, dst: EngineProfile) -> Plan:
    """Which target series can be produced from the source engine, and why the others cannot."""
    out = Plan()
    for intent, d in dst.metrics.items():
        s = src.metrics.get(intent)
        if s is None:
            out.skipped[intent] = f"{src.name} has no {intent} metric"
            continue
        factor = unit_factor(s.unit, d.unit)
        if factor is None:
            out.skipped[intent] = f"unit {s.unit} cannot be converted to {d.unit}"
            continue
        if d.type == "histogram" and s.type != "histogram":
            out.skipped[intent] = f"{s.name} is a {s.type}; a histogram cannot be rebuilt from it"
            continue
        if d.type == "summary" or s.type == "summary":
            out.skipped[intent] = "summaries (quantiles) cannot be converted"
            continue
        out.mappings.append(Mapping(intent, s, d, factor))
    return out
