"""What `alerts translate` says about each rule: its status, the findings, and the thresholds tuned to the old engine.

A rule's status is honest about what it watches afterwards: `translated` and `unchanged` only when every engine
series it reads is served by the target at its release (release data); `partial` when some series were renamed and
others are left that the target does not serve; `untranslated` when nothing could be; `unverified` when the release
data cannot say whether the target serves a series (a release not read): never reported as served.
"""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, Field

from switchover.alerts.shift import Shift

Mode = Literal["rename", "adapter"]
Severity = Literal["error", "warning", "info"]
Kind = Literal[
    "untranslatable",
    "not_engine_metric",
    "name_selector",
    "label",
    "grouping",
    "bucket",
    "unit",
    "adapter",
    "syntax",
    "engine_specific",
    "dead_series",
    "unverified",
    "source_series",
]
Status = Literal["translated", "unchanged", "partial", "untranslated", "unverified"]


class Finding(BaseModel):
    """Something about one rule a person should know: an error leaves (part of) the rule untranslated."""

    group: str
    rule: str
    severity: Severity
    kind: Kind
    metric: str | None = None
    detail: str
    url: str | None = Field(
        default=None, description="The engine source at the release that says so, when the release data has it"
    )


class Threshold(BaseModel):
    """A threshold that depends on the engine's distribution, with the measured shift when a bench run is given."""

    group: str
    rule: str
    intent: str = Field(
        description="What the series measures, as the engine profiles name it: ttft, tpot, itl, "
        "e2e, queue_time (latency) or running, waiting, kv_usage, preemptions (engine "
        "state)"
    )
    metric: str = Field(description="The source engine's series the rule reads, as written")
    comparison: str = Field(description="The comparison next to the number: >, <, >=, <=, == or !=")
    value: float = Field(description="The number as written in the rule (0 is left out: a presence check)")
    quantile: float | None = Field(
        default=None,
        description="The rule's histogram_quantile level (e.g. 0.99) on a "
        "histogram series; None otherwise (the shift then "
        "compares means)",
    )
    shift: Shift | None = Field(
        default=None,
        description="new/old factor the --bench run measured for this intent; "
        "None without --bench, for engine state, or when the run "
        "did not measure it",
    )
    suggested: float | None = Field(default=None, description="value × the median measured shift")
    suggested_range: tuple[float, float] | None = None
    note: str = ""


class RuleResult(BaseModel):
    group: str
    rule: str
    kind: Literal["alert", "record"]
    status: Status = Field(
        description="translated / unchanged: every engine series it reads is served by the "
        "target at its release; partial: some renamed, some left (series_left); "
        "untranslated: none could be; unverified: the release data cannot confirm "
        "a series (series_unverified)"
    )
    expr_before: str
    expr_after: str
    series_left: list[str] = Field(
        default_factory=list,
        description="engine series the rule still reads that the target does not serve at its release",
    )
    series_unverified: list[str] = Field(
        default_factory=list, description="engine series the target's release data does not cover"
    )


class TranslationReport(BaseModel):
    """What `alerts translate` did to every rule."""

    source_engine: str
    source_version: str | None = Field(
        default=None,
        description="the source release the rules were read at: as given, else the newest read (source_note)",
    )
    source_note: str | None = None
    target_engine: str
    target_version: str | None = Field(
        default=None,
        description="the target release whose series the rules must read: as given, else the newest read (target_note)",
    )
    target_note: str | None = None
    mode: Mode
    keep_unknown: bool = Field(
        default=False,
        description="rules left watching series the target does not serve were kept as warnings (--keep-unknown)",
    )
    rules: list[RuleResult]
    findings: list[Finding]
    thresholds: list[Threshold]
    notes: list[str] = Field(default_factory=list)

    @property
    def untranslated(self) -> list[RuleResult]:
        return [r for r in self.rules if r.status == "untranslated"]

    @property
    def errors(self) -> list[Finding]:
        """Findings that make the command fail (exit 1)."""
        return [f for f in self.findings if f.severity == "error"]
