"""Typed results of `switchover check`: a verdict per checklist item, the evidence behind it, one overall verdict."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, Field, model_validator

Verdict = Literal["go", "no-go", "warn", "not-run"]
Overall = Literal["go", "no-go", "incomplete"]
PartStatus = Literal["ran", "failed", "disabled", "unavailable"]


class Figure(BaseModel):
    """One key figure behind a verdict; `value` None means not measured, and `missing` says why."""

    name: str
    value: float | int | str | bool | None = None
    unit: str | None = None
    missing: str | None = None

    def text(self) -> str:
        if self.value is None:
            return f"missing ({self.missing or 'not measured'})"
        v = f"{self.value:.4g}" if isinstance(self.value, float) else str(self.value)
        return f"{v} {self.unit}" if self.unit else v


class Link(BaseModel):
    """A file of the run directory that holds the raw evidence (path relative to the run directory)."""

    label: str
    path: str


class Plot(BaseModel):
    """A plotly figure (its JSON), referenced by items through `id`."""

    id: str
    title: str
    figure: dict[str, Any]


LEGACY_IDS = {
    "s000.scheduling": "engine.scheduling",
    "s000.kv_cache": "engine.kv_cache",
    "s000.batching": "engine.batching",
    "s000.kernels": "engine.kernels",
    "s000.defaults": "engine.defaults",
    "s000.observability": "engine.observability",
    "s001.weights": "model.weights",
    "s001.tokenizer": "model.tokenizer",
    "s001.chat_template": "model.chat_template",
    "s001.sampling_defaults": "model.sampling_defaults",
    "s001.grace": "rollout.grace",
    "s001.client_timeout": "rollout.client_timeout",
    "s000.rollback": "rollout.rollback",
}
"""Checklist ids of switchover 0.1 run directories and configs (`check.waive`) -> today's ids."""

CHECKLIST_DOC = "docs/checklist.md"


def current_id(item_id: str) -> str:
    """Today's id of a checklist item, also when a saved file or config names it by its old id."""
    return LEGACY_IDS.get(item_id, item_id)


class Citation(BaseModel):
    """What a user can open for a fact behind an item: an engine's source at a release, docs, or the project's doc."""

    text: str
    url: str


class CheckItem(BaseModel):
    """One go/no-go checklist item (docs/checklist.md), judged."""

    id: str
    area: str
    title: str
    doc: str = Field(default="", description="where the item is explained: docs/checklist.md#<id>")
    sources: list[Citation] = Field(default_factory=list, description="what a user can open for the facts behind it")
    required: bool = True
    verdict: Verdict
    rule: str = Field(description="the rule that produced the verdict")
    reason: str = Field(description="the rule applied to these figures")
    evidence: list[Figure] = Field(default_factory=list)
    links: list[Link] = Field(default_factory=list)
    plots: list[str] = Field(default_factory=list, description="ids of plots in CheckReport.plots")
    waived: str | None = Field(default=None, description="why a not-run here does not make the check incomplete")

    @model_validator(mode="before")
    @classmethod
    def _today_id(cls, data: Any) -> Any:
        """An item saved under an old id (s000.*, s001.*) reads as today's, linked to its doc."""
        if isinstance(data, dict) and isinstance(data.get("id"), str):
            new = current_id(data["id"])
            data = {k: v for k, v in data.items() if k not in ("title_zh", "quote", "source")} | {"id": new}
            data.setdefault("doc", f"{CHECKLIST_DOC}#{new}")
        return data


class PartRun(BaseModel):
    """One part of the pre-flight (probe, verify, bench, ...): did it run, how long, which files."""

    part: str
    status: PartStatus = Field(
        description="ran; failed: it raised, an endpoint was down, its result was unreadable "
        "or the check was interrupted; disabled: turned off in switchover.yaml, "
        "left out on the command line (--only, --skip), or its inputs not given; "
        "unavailable: a module it needs could not be imported"
    )
    reason: str | None = Field(default=None, description="Why it did not run or failed; None when it ran")
    seconds: float | None = Field(default=None, description="How long it ran, s; None: it did not start")
    files: list[str] = Field(default_factory=list, description="What it wrote, relative to the run directory")


class EndpointSummary(BaseModel):
    role: str
    url: str
    engine: str
    model: str | None = None


class CheckReport(BaseModel):
    """check.json: everything `switchover report` renders."""

    name: str
    created_wall: float
    run_dir: str | None = None
    config_file: str | None = None
    overall: Overall
    overall_reason: str
    items: list[CheckItem]
    endpoints: list[EndpointSummary] = Field(default_factory=list)
    parts: list[PartRun] = Field(default_factory=list)
    total_s: float | None = None
    plots: list[Plot] = Field(default_factory=list)
    notes: list[str] = Field(default_factory=list)

    def counts(self) -> dict[str, int]:
        out = {"go": 0, "no-go": 0, "warn": 0, "not-run": 0}
        for item in self.items:
            out[item.verdict] += 1
        return out


def overall_verdict(items: list[CheckItem]) -> tuple[Overall, str]:
    """no-go if any item is no-go; incomplete if a required, unwaived item did not run; else go (warns listed)."""
    nogo = [i.id for i in items if i.verdict == "no-go"]
    if nogo:
        return "no-go", f"{len(nogo)} item(s) no-go: {', '.join(nogo)}"
    missing = [i.id for i in items if i.verdict == "not-run" and i.required and not i.waived]
    if missing:
        return "incomplete", f"{len(missing)} required item(s) not run: {', '.join(missing)}"
    warns = [i.id for i in items if i.verdict == "warn"]
    if warns:
        return "go", f"go with {len(warns)} warning(s): {', '.join(warns)}"
    return "go", "every item go"
