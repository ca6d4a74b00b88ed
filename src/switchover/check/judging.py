"""The building blocks of a rule: collect figures and statements, then derive the verdict from them."""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from importlib import resources
from typing import Any, TypeVar

import yaml
from pydantic import BaseModel, ConfigDict

from switchover.check.evidence import Evidence
from switchover.evidence.check import CHECKLIST_DOC, CheckItem, Citation, Figure, Link, Verdict, current_id

T = TypeVar("T")

PART_FILES = {
    "plan": ("plan", "plan.json"),
    "probe": ("probe results", "probe.json"),
    "verify": ("verify results", "verify.json"),
    "live_model": ("live tokenizer/template comparison", "live_model.json"),
    "metrics": ("metrics", "metrics.json"),
    "diff_model": ("model diff", "diff_model.json"),
    "grace": ("grace arithmetic", "grace.json"),
    "rollback": ("rollback evidence", "rollback.json"),
    "clients": ("client mix from the gateway ledger", "clients.json"),
}
"""The link each rule shows for a part it read: (label, file in the check run directory)."""

DEFAULT_MAX_ERROR_RATE = 0.01
DEFAULT_MAX_REGRESSION_PCT = 20.0


class ChecklistEntry(BaseModel):
    """One item of check/data/checklist.yaml."""

    model_config = ConfigDict(extra="forbid")

    id: str
    area: str
    title: str
    required: bool = True
    parts: list[str]
    rule: str
    sources: list[Citation]


def load_checklist() -> list[ChecklistEntry]:
    """The go/no-go checklist items (explained in docs/checklist.md), in report order."""
    text = resources.files("switchover.check").joinpath("data", "checklist.yaml").read_text(encoding="utf-8")
    return [ChecklistEntry.model_validate(e) for e in yaml.safe_load(text)["items"]]


@dataclass
class Limits:
    """Thresholds after falling back to bench.slos and the defaults."""

    max_error_rate: float
    max_regression_pct: float
    structured_drop: float
    longest_input_tolerance: float
    tokenizer_shift_pct: float

    @classmethod
    def of(cls, ev: Evidence) -> Limits:
        th, slos = ev.config.settings.thresholds, ev.config.slos

        def pick(own: float | None, slo: float | None, default: float) -> float:
            return float(own) if own is not None else float(slo) if slo is not None else default

        return cls(
            max_error_rate=pick(th.max_error_rate, slos.max_error_rate, DEFAULT_MAX_ERROR_RATE),
            max_regression_pct=pick(th.max_regression_pct, slos.max_regression_pct, DEFAULT_MAX_REGRESSION_PCT),
            structured_drop=th.structured_drop,
            longest_input_tolerance=th.longest_input_tolerance,
            tokenizer_shift_pct=th.tokenizer_shift_pct,
        )


@dataclass
class Judgement:
    """What a rule found: no-go / warn / ok statements, figures, and the sources it could not read."""

    figures: list[Figure] = field(default_factory=list)
    nogo: list[str] = field(default_factory=list)
    warn: list[str] = field(default_factory=list)
    ok: list[str] = field(default_factory=list)
    missing: list[str] = field(default_factory=list)
    links: list[Link] = field(default_factory=list)
    plots: list[str] = field(default_factory=list)

    def fig(self, name: str, value: Any, unit: str | None = None, missing: str | None = None) -> None:
        if value is None and missing is None:
            missing = "not measured"
        self.figures.append(Figure(name=name, value=value, unit=unit, missing=missing if value is None else None))

    def link(self, label: str, path: str) -> None:
        self.links.append(Link(label=label, path=path))

    def source(self, result: T | None, ev: Evidence, part: str, plot: str | None = None) -> T | None:
        """A part's result as this rule's source: linked to its file (and to the report's `plot` of it), or, when
        the part left none, why it is missing, recorded."""
        if result is None:
            self.missing.append(ev.why_missing(part))
            return None
        self.link(*PART_FILES[part])
        if plot is not None:
            self.plots.append(plot)
        return result

    @property
    def verdict(self) -> Verdict:
        if self.nogo:
            return "no-go"
        if not self.warn and not self.ok:
            return "not-run"
        return "warn" if self.warn else "go"

    def reason(self) -> str:
        parts = [f"NO-GO: {s}" for s in self.nogo] + [f"WARN: {s}" for s in self.warn] + [f"ok: {s}" for s in self.ok]
        if self.missing:
            parts.append("not measured: " + "; ".join(self.missing))
        return " | ".join(parts) if parts else "nothing measured"


_CJK = re.compile(r"[\u3000-\u303f\u3040-\u30ff\u4e00-\u9fff\uac00-\ud7af\uff00-\uffef]")


def short_text(text: str | None, n: int = 70) -> str:
    """A sample text or engine answer cut to one short line; text in a CJK script is described rather than quoted,
    so the report reads in English whatever the inputs were."""
    t = (text or "").replace("\n", " ")
    if _CJK.search(t):
        return f"CJK text of {len(t)} characters"
    return t if len(t) <= n else t[: n - 1] + "…"


def item(entry: ChecklistEntry, j: Judgement, waive: dict[str, str]) -> CheckItem:
    """The CheckItem of one entry from its judgement."""
    verdict = j.verdict
    waivers = {current_id(k): v for k, v in waive.items()}  # a config may still name an item by its old id
    return CheckItem(
        id=entry.id,
        area=entry.area,
        title=entry.title,
        doc=f"{CHECKLIST_DOC}#{entry.id}",
        sources=entry.sources,
        required=entry.required,
        verdict=verdict,
        rule=entry.rule,
        reason=j.reason(),
        evidence=j.figures,
        links=j.links,
        plots=j.plots,
        waived=waivers.get(entry.id) if verdict == "not-run" else None,
    )


def pct(a: float | None, b: float | None) -> float | None:
    """(b / a − 1) × 100, None when not computable."""
    if a is None or b is None or a == 0:
        return None
    return round((b / a - 1) * 100, 2)
