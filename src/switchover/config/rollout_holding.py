"""The `rollout.holding:` section: how long the old engine stays warm after 100 %, per failure type.

"Traffic looks fine" does not end the rollback window; it ends when each kind of failure has had
time to show. Crashes show in minutes (error rate), broken formats in hours (parse-failure rate), semantic drift in
days (human spot checks, downstream metrics), long-tail task regressions in a week (per-task-type A/B); and after
100 % the old instance stays warm for 48 h, switchable back with one command. Each failure type therefore
has its own window and its own gates; the holding ends when every window has closed.
"""

from __future__ import annotations

from enum import StrEnum
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from switchover.inputs import MAX_SECONDS, BaseUrl


class FailureType(StrEnum):
    """The failure types of a swap, by how long they take to show (docs/rollout.md, holding)."""

    CRASH = "crash"  # minutes: error rate, fallbacks (OOM, crashes)
    LATENCY = "latency"  # a daily peak: TTFT / TPOT tails
    FORMAT = "format"  # hours: parse failures, output-length shift
    QUALITY = "quality"  # days: human spot checks, semantic drift
    BUSINESS = "business"  # a week: downstream / business metrics, per task type


class FailureWindow(BaseModel):
    """How long one failure type is watched after 100 %, and by which gates (built-in or custom names)."""

    model_config = ConfigDict(extra="forbid", allow_inf_nan=False)

    duration_s: float = Field(ge=0, le=4 * MAX_SECONDS, description="Window length after 100 %; 0 switches it off")
    gates: list[str] = Field(
        default_factory=list,
        description="Gates judged while the window is open (built-in names or rollout.custom_gates names); "
        "an empty list closes on time alone and is reported as unwatched",
    )
    eval_window_s: float | None = Field(
        default=None, gt=0, le=MAX_SECONDS, description="Gates look at the last N seconds (default rollout.window_s)"
    )


# Defaults (docs/rollout.md, holding window): crash in minutes → 1 h; latency over one daily peak → 24 h;
# format in hours → 24 h; quality: "the old instance stays 48 h after 100 %" → 48 h; business metrics show over a
# week (a weekly cycle of downstream signals) → 7 days. Shorten it where the signal is daily.
DEFAULT_WINDOWS: dict[FailureType, FailureWindow] = {
    FailureType.CRASH: FailureWindow(duration_s=3600, gates=["error_rate", "fallback_ratio"]),
    FailureType.LATENCY: FailureWindow(duration_s=86400, gates=["ttft_p99_ratio", "tpot_p99_ratio"]),
    FailureType.FORMAT: FailureWindow(duration_s=86400, gates=["output_length_shift"]),
    FailureType.QUALITY: FailureWindow(duration_s=172800, gates=[]),
    FailureType.BUSINESS: FailureWindow(duration_s=7 * 86400, gates=[]),
}


class OldArmCheck(BaseModel):
    """The old engine's readiness (`switchover ready`'s 1-token check) on a schedule while holding."""

    model_config = ConfigDict(extra="forbid", allow_inf_nan=False)

    url: BaseUrl | None = Field(default=None, description="Old engine base URL (default: old.url of switchover.yaml)")
    model: str | None = Field(default=None, description="Model to request (default: old.model, else discovered)")
    interval_s: float = Field(default=300.0, gt=0, le=MAX_SECONDS, description="Seconds between checks")
    max_ms: float = Field(default=5000.0, gt=0, le=MAX_SECONDS * 1000, description="Budget of one 1-token check")
    max_age_s: float | None = Field(
        default=None, gt=0, le=MAX_SECONDS, description="A check older than this is stale (default 3 × interval_s)"
    )

    @property
    def stale_after_s(self) -> float:
        return self.max_age_s if self.max_age_s is not None else 3 * self.interval_s


class DrillRequirement(BaseModel):
    """The last `switchover drill` (time to the first good answer on old) that holding relies on."""

    model_config = ConfigDict(extra="forbid", allow_inf_nan=False)

    runs: str = Field(default="runs", description="Folder of run directories holding <ts>-drill/drill.json")
    required: bool = Field(default=True, description="Refuse to enter holding without a passing, recent drill")
    max_age_s: float = Field(default=30 * 86400.0, gt=0, le=52 * 7 * 86400.0, description="Older drills do not count")
    max_recovery_s: float | None = Field(
        default=None, gt=0, le=MAX_SECONDS, description="Acceptable outage; the drill's recovery_s must be within it"
    )


class RollbackPrerequisites(BaseModel):
    """The four things a rollback needs (docs/checklist.md#rollout.rollback): config, weights, route, monitoring
    (listed and checked)."""

    model_config = ConfigDict(extra="forbid", allow_inf_nan=False)

    old_launch: list[str] = Field(
        default_factory=list, description="Files that start the old engine (launch config, unit, compose file)"
    )
    old_weights: list[str] = Field(
        default_factory=list, description="Paths of the old engine's weights (kept, not overwritten by a conversion)"
    )
    monitoring: bool = Field(default=True, description="Check that the old engine's metrics endpoint answers")


class HoldingSettings(BaseModel):
    """`rollout.holding`: the rollback window after the last (100 %) stage."""

    model_config = ConfigDict(extra="forbid", allow_inf_nan=False)

    enabled: bool = Field(default=True, description="Enter `holding` when the last stage has weight 100")
    windows: dict[FailureType, FailureWindow] = Field(
        default_factory=lambda: {k: v.model_copy(deep=True) for k, v in DEFAULT_WINDOWS.items()},
        description="Per failure type; types not given keep their defaults, duration_s: 0 switches one off",
    )
    on_fail: Literal["zero", "previous"] = Field(
        default="zero", description="Where a failed hard gate (or `rollout rollback`) goes while holding"
    )
    old: OldArmCheck = Field(default_factory=OldArmCheck)
    drill: DrillRequirement = Field(default_factory=DrillRequirement)
    prerequisites: RollbackPrerequisites = Field(default_factory=RollbackPrerequisites)
    baseline_samples: int = Field(
        default=2000, ge=10, le=100_000, description="Old-arm samples kept from the last stage before 100 %"
    )

    @field_validator("windows", mode="before")
    @classmethod
    def _merge(cls, value: object) -> object:
        if not isinstance(value, dict):
            return value
        merged: dict[object, object] = {k.value: v.model_dump() for k, v in DEFAULT_WINDOWS.items()}
        for key, given in value.items():
            base = merged.get(str(key))
            merged[key] = {**base, **given} if isinstance(base, dict) and isinstance(given, dict) else given
        return merged

    @model_validator(mode="after")
    def _active(self) -> HoldingSettings:
        self.windows = {k: v for k, v in self.windows.items() if v.duration_s > 0}
        if self.enabled and not self.windows:
            raise ValueError("holding is enabled but every window has duration_s: 0 (set enabled: false instead)")
        return self

    def gate_names(self) -> set[str]:
        """Every gate a window names (checked against the known gates by RolloutSettings)."""
        return {g for w in self.windows.values() for g in w.gates}
