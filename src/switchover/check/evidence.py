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
from typing import TYPE_CHECKING

from pydantic import BaseModel, Field, ValidationError

from switchover.config.bench import BenchSlos
from switchover.config.check import CheckSection
from switchover.errors import BadInput
from switchover.evidence.check import EndpointSummary, PartRun
from switchover.plan.capacity import CapacityResult
from switchover.plan.grace import Finding, GraceNeed
from switchover.plan.translate import LostItem, Translation
from switchover.runs import MAX_JSON_BYTES, RunDir
from switchover.textfile import read_bytes

if TYPE_CHECKING:  # another verb's result: imported when a run directory is read (`_model`), so a check whose
    # package is missing still reports the rest
    from switchover.evidence.bench import BenchReport
    from switchover.model.diff import ModelDiff
    from switchover.probe.report import ProbeReport
    from switchover.rollout.client_defaults import ClientMix
    from switchover.rollout.rollback_view import RollbackEvidence
    from switchover.verify.report import EquivalenceReport


class CheckConfig(BaseModel):
    """config.json of a check run."""

    config_file: str | None = None
    endpoints: list[EndpointSummary]
    settings: CheckSection
    gateway_drain_seconds: float | None = Field(default=None, description="gateway.drain_seconds, when configured")
    slos: BenchSlos = Field(default_factory=BenchSlos, description="bench.slos from switchover.yaml")


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

    api_differences: list[LostItem] = Field(default_factory=list)
    translation: Translation | None = None
    capacity: CapacityResult | None = None
    notes: list[str] = Field(default_factory=list)


class ConfiguredGrace(BaseModel):
    name: str
    value_s: float | None
    source: str
    line: int | None = None


class GraceEvidence(BaseModel):
    """grace.json: the need (max_tokens × TPOT p99 + TTFT p99 + margin) and every grace period / timeout found."""

    max_tokens: int | None = None
    tpot_p99_ms: float | None = None
    ttft_p99_ms: float | None = None
    latency_source: str | None = None
    need: GraceNeed | None = None
    configured: list[ConfiguredGrace] = Field(default_factory=list)
    findings: list[Finding] = Field(default_factory=list, description="grace periods and timeouts in deploy files")
    skipped: list[str] = Field(default_factory=list, description="deploy files that could not be read, with why")
    client_timeout_s: float | None = None
    missing: str | None = None


@dataclass
class Evidence:
    """Everything the rules look at; a part that did not run is None and its PartRun says why."""

    config: CheckConfig
    parts: dict[str, PartRun] = field(default_factory=dict)
    plan: PlanEvidence | None = None
    probe: ProbeReport | None = None
    verify: EquivalenceReport | None = None
    bench: BenchReport | None = None
    bench_dir: str | None = None  # relative to the check run directory
    live_model: LiveModel | None = None
    metrics: MetricsEvidence | None = None
    diff_model: ModelDiff | None = None
    grace: GraceEvidence | None = None
    rollback: RollbackEvidence | None = None
    clients: ClientMix | None = None

    def why_missing(self, part: str) -> str:
        run = self.parts.get(part)
        if run is None:
            return f"{part} not run"
        if run.status == "ran":
            return f"{part} ran but left no result"
        return f"{part} {run.status}: {run.reason or 'no reason recorded'}"


def _result_models() -> dict[str, type[BaseModel]]:
    """The model each part file is read back into: the part's own result type, so the rules read attributes.
    Imported here rather than at module load: judging evidence built in memory does not need them all."""
    from switchover.model.diff import ModelDiff
    from switchover.probe.report import ProbeReport
    from switchover.rollout.client_defaults import ClientMix
    from switchover.rollout.rollback_view import RollbackEvidence
    from switchover.verify.report import EquivalenceReport

    return {
        "plan": PlanEvidence,
        "probe": ProbeReport,
        "verify": EquivalenceReport,
        "live_model": LiveModel,
        "metrics": MetricsEvidence,
        "diff_model": ModelDiff,
        "grace": GraceEvidence,
        "rollback": RollbackEvidence,
        "clients": ClientMix,
    }


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

    models = _result_models()
    for part, model in models.items():
        if not rd.has(f"{part}.json"):
            continue
        try:
            setattr(ev, part, rd.read_json(part, model))  # the field's type is `model`'s (see Evidence)
        except (ValidationError, ValueError) as exc:
            unreadable(part, str(exc).splitlines()[0])
    bench_dir = find_bench_dir(rd)
    if bench_dir is not None:
        from switchover.evidence.bench import BenchReport

        ev.bench_dir = bench_dir
        try:
            raw = read_bytes(
                rd.path / bench_dir / "summary.json", max_bytes=MAX_JSON_BYTES, what="bench summary (JSON)"
            )
            ev.bench = BenchReport.model_validate_json(raw)
        except (ValidationError, ValueError, BadInput) as exc:
            unreadable("bench", str(exc).splitlines()[0])
    return ev
