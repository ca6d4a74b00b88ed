"""Typed results of `switchover probe`: one observation per side, a verdict per probe, one report."""

from __future__ import annotations

from enum import Enum
from typing import Any, Literal

from pydantic import BaseModel, Field, field_validator

ObservationStatus = Literal["observed", "failed", "skipped"]
Verdict = Literal["same", "differs", "inconclusive", "observed"]


class Observation(BaseModel):
    """What one probe saw on one endpoint. `value` is what gets compared; `detail` is evidence."""

    status: ObservationStatus = "observed"
    value: Any = None
    summary: str = ""
    detail: dict[str, Any] = Field(default_factory=dict)
    expected: Any = None  # what the engine profile predicts (when the engine is named)
    profile_match: bool | None = None

    @field_validator("value", "expected", mode="before")
    @classmethod
    def _plain(cls, v: Any) -> Any:
        """Vocabulary enums (probe/values.py) are stored as their plain strings: reports read the same."""
        return plain_value(v)

    @classmethod
    def failed(cls, reason: str, **detail: Any) -> Observation:
        return cls(status="failed", summary=reason, detail=detail)

    @classmethod
    def skipped(cls, reason: str) -> Observation:
        return cls(status="skipped", summary=reason)


def plain_value(v: Any) -> Any:
    """An observed or predicted value with vocabulary enums replaced by their strings."""
    if isinstance(v, Enum):
        return v.value
    if isinstance(v, dict):
        return {k: plain_value(x) for k, x in v.items()}
    return v


class ProbeResult(BaseModel):
    """One probe, old and new side by side, with its verdict."""

    id: str
    title: str
    category: str
    request: str
    observes: str
    breaking: bool
    breaks: str
    old: Observation
    new: Observation | None = None
    verdict: Verdict
    breaking_difference: bool = False


class EndpointInfo(BaseModel):
    """One probed endpoint."""

    url: str
    engine: str | None = None
    model: str | None = None
    context: int | None = None
    reachable: bool = True
    reason: str | None = None


class ProbeReport(BaseModel):
    """Everything `switchover probe` found; `partial` when an endpoint went away."""

    old: EndpointInfo
    new: EndpointInfo | None = None
    results: list[ProbeResult]
    breaking_differences: list[str] = Field(default_factory=list)
    profile_mismatches: list[str] = Field(default_factory=list)  # "old:stop.count" ...
    partial: bool = False
    partial_reason: str | None = None

    @property
    def counts(self) -> dict[str, int]:
        out: dict[str, int] = {}
        for r in self.results:
            out[r.verdict] = out.get(r.verdict, 0) + 1
        return out
