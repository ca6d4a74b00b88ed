"""What the parts of a check measured, as kept in the run directory; the rules read only this.

Files of a check run directory (each written as soon as its part finishes):
    config.json        the check settings and endpoints it ran with (no secrets)
    parts.json         per part: ran | failed | disabled | unavailable, why, seconds
    plan.json  probe.json  verify.json  live_model.json  metrics.json  diff_model.json  grace.json
    <stamp>-<name>-bench/   the A/B bench ladder's own run directory (summary.json, requests.parquet)
    check.json  report.html  report.md
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from pydantic import BaseModel, Field, ValidationError

from switchover.config.check import CheckSection
from switchover.report.models import EndpointSummary, PartRun
from switchover.runs import RunDir


class CheckConfig(BaseModel):
    """config.json of a check run."""

    config_file: str | None = None
    endpoints: list[EndpointSummary]
    settings: CheckSection
    gateway_drain_seconds: float | None = Field(default=None, description="gateway.drain_seconds, when configured")
    slos: dict[str, Any] = Field(default_factory=dict, description="bench.slos from switchover.yaml")


class TextCount(BaseModel):
    text: str
    old: int | None
    new: int | None
    same_ids: bool | None = None


class ChatCount(BaseModel):
    messages: list[dict[str, str]]
    old_prompt_tokens: int | None
    new_prompt_tokens: int | None
    old_error: str | None = None
    new_error: str | None = None


class LiveModel(BaseModel):
    """live_model.json: the same texts tokenized by both servers, the same chat messages' prompt tokens."""

    texts: list[TextCount] = Field(default_factory=list)
    chats: list[ChatCount] = Field(default_factory=list)
    notes: list[str] = Field(default_factory=list)


class MetricSide(BaseModel):
    url: str
    reachable: bool
    reason: str | None = None
    families: int = 0
    profile_names_found: list[str] = Field(default_factory=list)
    profile_names_missing: list[str] = Field(default_factory=list)


class MetricIntent(BaseModel):
    intent: str
    old: str | None
    new: str | None
    old_unit: str | None = None
    new_unit: str | None = None
    status: str  # same | renamed | unit | buckets | missing_in_new | new_only


class MetricsEvidence(BaseModel):
    """metrics.json: the engines' metric names by intent (profiles) and what /metrics really served."""

    old_engine: str
    new_engine: str
    intents: list[MetricIntent] = Field(default_factory=list)
    old: MetricSide | None = None
    new: MetricSide | None = None


class PlanEvidence(BaseModel):
    """plan.json: API facts that differ between the engine profiles, a launch translation, a capacity plan."""

    api_differences: list[dict[str, Any]] = Field(default_factory=list)
    translation: dict[str, Any] | None = None
    capacity: dict[str, Any] | None = None
    notes: list[str] = Field(default_factory=list)


class ConfiguredGrace(BaseModel):
    name: str
    value_s: float | None
    source: str
    line: int | None = None


class GraceEvidence(BaseModel):
    """grace.json: the need (seed 001 §3 arithmetic) and every grace period / timeout found."""

    max_tokens: int | None = None
    tpot_p99_ms: float | None = None
    ttft_p99_ms: float | None = None
    latency_source: str | None = None
    need: dict[str, Any] | None = Field(default=None, description="switchover.plan.grace.GraceNeed")
    configured: list[ConfiguredGrace] = Field(default_factory=list)
    findings: list[dict[str, Any]] = Field(default_factory=list, description="plan.grace.Finding of deploy files")
    skipped: list[str] = Field(default_factory=list, description="deploy files that could not be read, with why")
    client_timeout_s: float | None = None
    missing: str | None = None


@dataclass
class Evidence:
    """Everything the rules look at; a part that did not run is None and its PartRun says why."""

    config: CheckConfig
    parts: dict[str, PartRun] = field(default_factory=dict)
    plan: PlanEvidence | None = None
    probe: Any = None  # switchover.probe.ProbeReport
    verify: Any = None  # switchover.verify.EquivalenceReport
    bench: Any = None  # switchover.bench.results.BenchReport
    bench_dir: str | None = None  # relative to the check run directory
    live_model: LiveModel | None = None
    metrics: MetricsEvidence | None = None
    diff_model: dict[str, Any] | None = None
    grace: GraceEvidence | None = None
    rollback: Any = None  # switchover.rollout.rollback_view.RollbackEvidence

    def why_missing(self, part: str) -> str:
        run = self.parts.get(part)
        if run is None:
            return f"{part} not run"
        if run.status == "ran":
            return f"{part} ran but left no result"
        return f"{part} {run.status}: {run.reason or 'no reason recorded'}"


def _model(name: str) -> type[BaseModel] | None:
    """The pydantic model of another helper's result, or None when that package is not importable."""
    try:
        if name == "probe":
            from switchover.probe.report import ProbeReport

            return ProbeReport
        if name == "verify":
            from switchover.verify.report import EquivalenceReport

            return EquivalenceReport
        if name == "bench":
            from switchover.bench.results import BenchReport

            return BenchReport
        if name == "rollback":
            from switchover.rollout.rollback_view import RollbackEvidence

            return RollbackEvidence
    except ImportError:
        return None
    return None


_OWN: dict[str, type[BaseModel]] = {"plan": PlanEvidence, "live_model": LiveModel, "metrics": MetricsEvidence,
                                    "grace": GraceEvidence}


def find_bench_dir(rd: RunDir) -> str | None:
    """The bench run directory nested in a check run (the newest one holding a summary.json)."""
    found = sorted(p for p in rd.path.iterdir() if p.is_dir() and (p / "summary.json").exists())
    return found[-1].name if found else None


def load_evidence(rd: RunDir) -> Evidence:
    """Read a check run directory back; an unreadable part file becomes a failed part with the reason."""
    config = rd.read_json("config", CheckConfig)
    parts: dict[str, PartRun] = {}
    if rd.has("parts.json"):
        for p in rd.read_json("parts"):
            run = PartRun.model_validate(p)
            parts[run.part] = run
    ev = Evidence(config=config, parts=parts)

    def unreadable(part: str, why: str) -> None:
        ev.parts[part] = PartRun(part=part, status="failed", reason=f"result unreadable: {why}")

    for part in ("plan", "probe", "verify", "live_model", "metrics", "grace", "rollback"):
        if not rd.has(f"{part}.json"):
            continue
        model = _OWN.get(part) or _model(part)
        if model is None:
            unreadable(part, f"switchover.{part} is not importable")
            continue
        try:
            setattr(ev, part, rd.read_json(part, model))
        except (ValidationError, ValueError) as exc:
            unreadable(part, str(exc).splitlines()[0])
    if rd.has("diff_model.json"):
        ev.diff_model = rd.read_json("diff_model")
    bench_dir = find_bench_dir(rd)
    if bench_dir is not None:
        ev.bench_dir = bench_dir
        model = _model("bench")
        if model is None:
            unreadable("bench", "switchover.bench is not importable")
        else:
            try:
                ev.bench = model.model_validate_json((rd.path / bench_dir / "summary.json").read_bytes())
            except (ValidationError, ValueError, OSError) as exc:
                unreadable("bench", str(exc).splitlines()[0])
    return ev
