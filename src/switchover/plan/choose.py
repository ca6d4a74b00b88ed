"""Rank the five engines for a model, hardware and requirements, every reason a cited fact (issue 15 §1).

Pure: takes a ModelCard (with its raw quantization_config), the hardware, the requirements and optional probe
evidence, and looks everything up in data: the weight-format matrix (engines/formats.py), the engine profiles and
features (engines/features.py), and `plan capacity`'s own function for the capacity per replica. A fact the data
lacks is "unknown" (ok None). The ranking is lexicographic over counted facts, no weights: engines without a
blocker first, then fewer blockers, fewer unknowns, fewer unverified facts, fewer API differences from the clients'
current engine, more concurrency per replica.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, Field, computed_field

from switchover.engines import EngineProfile, load_profile
from switchover.engines.compat import lookup_at, sm_of
from switchover.engines.features import api_field_support, feature_support, parse_api_field
from switchover.engines.formats import ENGINES, Device, format_of_card
from switchover.errors import BadInput
from switchover.hardware.catalog import find_gpu
from switchover.hardware.fingerprint import HostFingerprint
from switchover.model.card import ModelCard
from switchover.plan.capacity import capacity
from switchover.plan.overhead import EngineVersion, resolve_version
from switchover.plan.parallel import check_layout

FactKind = Literal["format", "context", "capacity", "concurrency", "rate", "feature", "api_field", "probe"]

#: API semantics compared against the clients' current engine (`--from`): each is a cited profile fact
COMPARED_API = (
    "stop_matching",
    "stop_string_in_output",
    "unknown_field_policy",
    "unknown_model_policy",
    "seed_per_request",
    "n_gt_1",
    "generation_config_applied",
    "validation_status",
    "overload_status",
    "error_body",
    "streaming_usage",
    "cached_tokens_reported",
    "context_overflow",
    "openai_json_schema",
    "max_stop_strings",
)


class Hardware(BaseModel):
    """What the engines would run on."""

    device: Device
    label: str
    gpu_name: str | None = None
    gpu_count: int = 1
    total_gib: float | None = Field(default=None, description="memory per GPU")
    sm: int | None = None
    source: str


def catalog_hardware(name: str, count: int) -> Hardware:
    """COUNT GPUs of a catalog model."""
    spec = find_gpu(name)
    return Hardware(
        device="cuda",
        label=f"{count} x {spec.name}",
        gpu_name=spec.name,
        gpu_count=count,
        total_gib=spec.total_gib,
        sm=spec.sm,
        source=f"GPU catalog: {spec.source}",
    )


def fingerprint_hardware(fp: HostFingerprint, ref: str) -> Hardware:
    """The hardware of a fingerprint (its first GPU's model; all GPUs counted); a GPU-less host is CPU."""
    if not fp.gpu_present or not fp.gpus:
        return Hardware(device="cpu", label=f"CPU ({ref}: {fp.reason or 'no GPU'})", gpu_count=0, source=ref)
    g = fp.gpus[0]
    sm = sm_of(g.compute_capability)
    name = g.catalog_name
    total = find_gpu(name).total_gib if name else g.memory_total_mib / 1024
    return Hardware(
        device="cuda",
        label=f"{len(fp.gpus)} x {name or g.name}",
        gpu_name=name,
        gpu_count=len(fp.gpus),
        total_gib=total,
        sm=sm,
        source=f"fingerprint {ref}",
    )


def cpu_hardware() -> Hardware:
    return Hardware(device="cpu", label="CPU", gpu_count=0, source="--cpu")


class Requirements(BaseModel):
    """What the deployment needs."""

    context: int | None = Field(default=None, description="tokens per request (prompt + output) to serve")
    concurrency: int | None = Field(default=None, description="concurrent requests per replica")
    rate: float | None = Field(default=None, description="requests per second")
    features: list[str] = Field(default_factory=list)
    api_fields: list[str] = Field(default_factory=list)
    current_engine: str | None = Field(default=None, description="the engine the clients use today")


class ProbeEvidence(BaseModel):
    """What a `switchover probe --json` report says: the engines probed and the breaking differences seen."""

    old_engine: str | None
    new_engine: str | None
    breaking: list[str] = Field(default_factory=list)
    source: str


def probe_evidence(report: Any, ref: str) -> ProbeEvidence:
    """Evidence from a ProbeReport (switchover.probe.report)."""
    return ProbeEvidence(
        old_engine=report.old.engine,
        new_engine=report.new.engine if report.new else None,
        breaking=[r.id for r in report.results if r.breaking_difference],
        source=f"probe {ref}",
    )


class Fact(BaseModel):
    """One reason: what was checked, whether it holds (None: unknown), and the fact it rests on."""

    kind: FactKind
    what: str
    ok: bool | None
    detail: str
    source: str | None = None
    verified: bool = False


class CapacitySummary(BaseModel):
    tp: int
    kv_tokens: int
    max_concurrency: int
    context: int
    binding: str
    starts: bool


class EngineChoice(BaseModel):
    """One engine's place in the ranking and every fact behind it."""

    rank: int = 0
    engine: str
    display_name: str
    profile_version: str
    engine_version: EngineVersion | None = Field(
        default=None, description="the release assessed: as pinned (-e ENGINE@VERSION), else the newest known, and said"
    )
    loads: bool | None
    kernel: str | None = None
    capacity: CapacitySummary | None = None
    facts: list[Fact] = Field(default_factory=list)
    api_differences: list[str] = Field(default_factory=list)

    @property
    def blockers(self) -> list[Fact]:
        return [f for f in self.facts if f.ok is False]

    @property
    def unknowns(self) -> list[Fact]:
        return [f for f in self.facts if f.ok is None]

    @property
    def unverified(self) -> list[Fact]:
        """Known facts that rest on data marked unverified (or a prediction whose error is unknown)."""
        return [f for f in self.facts if f.ok is not None and not f.verified]

    def verdict(self) -> str:
        if self.blockers:
            return f"blocked: {self.blockers[0].what}: {self.blockers[0].detail}"
        tail = f", {len(self.unverified)} unverified" if self.unverified else ""
        if self.unknowns:
            return f"no blocker; {len(self.unknowns)} unknown ({', '.join(f.what for f in self.unknowns[:3])})" + tail
        return "no blocker; every fact known" + tail


class ChooseResult(BaseModel):
    model: str
    model_source: str
    format: str | None
    format_reason: str
    hardware: Hardware
    requirements: Requirements
    engines: list[EngineChoice]
    notes: list[str] = Field(default_factory=list)

    @computed_field(description="Engine -> its verdict in one line, in rank order")  # type: ignore[prop-decorator]
    @property
    def verdicts(self) -> dict[str, str]:
        return {c.engine: c.verdict() for c in self.engines}


def _capacity_fact(
    card: ModelCard, profile: EngineProfile, hw: Hardware, req: Requirements, version: str | None = None
) -> tuple[Fact, CapacitySummary | None]:
    if hw.device == "cpu":
        return Fact(
            kind="capacity",
            what="capacity per replica",
            ok=None,
            detail="not computed: `plan capacity` models GPU memory, not a CPU host",
        ), None
    if hw.total_gib is None:
        return Fact(
            kind="capacity", what="capacity per replica", ok=None, detail="not computed: the GPU's memory is unknown"
        ), None
    tp = hw.gpu_count
    try:
        check_layout(card, profile, tp, 1)
    except BadInput as exc:
        return Fact(
            kind="capacity",
            what=f"TP={tp} layout",
            ok=False,
            detail=exc.message,
            source=f"{profile.name} profile parallel rules (plan parallel)",
            verified=True,
        ), None
    try:
        res = capacity(
            card,
            profile,
            hw.total_gib,
            gpu_name=hw.gpu_name,
            tp=tp,
            max_model_len=req.context,
            context=req.context,
            engine_version=version,
        )
    except BadInput as exc:
        return Fact(kind="capacity", what="capacity per replica", ok=None, detail=f"TP={tp}: {exc.message}"), None
    summary = CapacitySummary(
        tp=tp,
        kv_tokens=res.tokens,
        max_concurrency=res.max_concurrency,
        context=res.context,
        binding=res.binding_limit,
        starts=res.instance.starts,
    )
    err = (
        f"likely {res.range.low_tokens:,}+ tokens, median error {res.range.median_abs_error:.0%}"
        if res.range
        else f"error unknown: {res.range_missing}"
        if res.range_missing
        else ""
    )
    source = f"switchover plan capacity ({profile.name} {res.budget} memory model; weights: {res.weights_source})"
    if not res.instance.starts:
        return Fact(
            kind="capacity",
            what="fits",
            ok=False,
            source=source,
            verified=res.range is not None,
            detail=f"does not start on {hw.label} with TP={tp}: {res.instance.problem}",
        ), summary
    if res.max_concurrency < 1:
        return Fact(
            kind="capacity",
            what="fits one request",
            ok=False,
            source=source,
            verified=res.range is not None,
            detail=f"TP={tp}: KV {res.tokens:,} tokens cannot hold one request of {res.context:,} tokens ({err})",
        ), summary
    return Fact(
        kind="capacity",
        what="capacity per replica",
        ok=True,
        source=source,
        verified=res.range is not None,
        detail=f"TP={tp}: KV {res.tokens:,} tokens, {res.max_concurrency} concurrent requests of "
        f"{res.context:,} tokens (binding: {res.binding_limit}; {err})",
    ), summary


def _api_differences(profile: EngineProfile, current: EngineProfile) -> list[str]:
    out = []
    for fact in COMPARED_API:
        mine, theirs = getattr(profile.api, fact), getattr(current.api, fact)
        if mine != theirs:
            out.append(
                f"{fact}: {current.name} {theirs!r} -> {profile.name} {mine!r} [{profile.api.sources.get(fact, '?')}]"
            )
    return out


def assess(
    engine: str,
    card: ModelCard,
    fmt: str | None,
    fmt_reason: str,
    hw: Hardware,
    req: Requirements,
    probe: ProbeEvidence | None = None,
    version: str | None = None,
) -> EngineChoice:
    """Every fact for one engine at a release (None: the newest known)."""
    profile = load_profile(engine, version)
    choice = EngineChoice(
        engine=profile.name,
        display_name=profile.display_name,
        profile_version=profile.version_read,
        loads=None,
        engine_version=resolve_version(profile, version),
    )
    if fmt is None:
        choice.facts.append(
            Fact(
                kind="format",
                what="loads the weights",
                ok=None,
                detail=f"unknown: the checkpoint's format is not in the matrix ({fmt_reason})",
            )
        )
    else:
        v = lookup_at(profile.name, fmt, hw.device, hw.sm, version)
        choice.loads, choice.kernel = v.loads, v.kernel
        choice.facts.append(
            Fact(kind="format", what=f"loads {fmt}", ok=v.loads, detail=v.reason, source=v.source, verified=v.verified)
        )
    if req.context and card.max_position_embeddings and req.context > card.max_position_embeddings:
        choice.facts.append(
            Fact(
                kind="context",
                what=f"context {req.context:,}",
                ok=False,
                source=card.source,
                verified=True,
                detail=f"the model's max_position_embeddings is {card.max_position_embeddings:,}",
            )
        )
    elif choice.loads is not False:
        fact, summary = _capacity_fact(card, profile, hw, req, version)
        choice.facts.append(fact)
        choice.capacity = summary
        if req.concurrency is not None:
            if summary is None or not summary.starts:
                choice.facts.append(
                    Fact(
                        kind="concurrency",
                        what=f"{req.concurrency} concurrent",
                        ok=None if summary is None else False,
                        detail="no capacity figure" if summary is None else "the instance does not start",
                    )
                )
            else:
                ok = summary.max_concurrency >= req.concurrency
                choice.facts.append(
                    Fact(
                        kind="concurrency",
                        what=f"{req.concurrency} concurrent",
                        ok=ok,
                        source=fact.source,
                        verified=fact.verified,
                        detail=f"{summary.max_concurrency} per replica at {summary.context:,} "
                        f"tokens ({summary.binding})",
                    )
                )
    if req.rate is not None:
        choice.facts.append(
            Fact(
                kind="rate",
                what=f"{req.rate:g} req/s",
                ok=None,
                detail="unknown: a request-rate target needs measured throughput "
                "(`switchover bench`); no figure is predicted",
            )
        )
    for feature in req.features:
        s = feature_support(profile, feature)
        choice.facts.append(
            Fact(kind="feature", what=feature, ok=s.supported, detail=s.detail, source=s.source, verified=s.verified)
        )
    for text in req.api_fields:
        name, count = parse_api_field(text)
        s = api_field_support(profile, name, count)
        choice.facts.append(
            Fact(kind="api_field", what=s.what, ok=s.supported, detail=s.detail, source=s.source, verified=s.verified)
        )
    if probe is not None:
        if profile.name == probe.new_engine:
            ok = not probe.breaking
            choice.facts.append(
                Fact(
                    kind="probe",
                    what="probed against the clients' engine",
                    ok=ok,
                    source=probe.source,
                    verified=True,
                    detail=f"{len(probe.breaking)} breaking differences from {probe.old_engine}"
                    + (f": {', '.join(probe.breaking[:8])}" if probe.breaking else ""),
                )
            )
        elif profile.name == probe.old_engine:
            choice.facts.append(
                Fact(
                    kind="probe",
                    what="probed against the clients' engine",
                    ok=True,
                    source=probe.source,
                    verified=True,
                    detail="the engine the clients were probed on (old side)",
                )
            )
    if req.current_engine:
        current = load_profile(req.current_engine)
        if current.name != profile.name:
            choice.api_differences = _api_differences(profile, current)
    return choice


def _rank_key(c: EngineChoice) -> tuple[Any, ...]:
    conc = c.capacity.max_concurrency if c.capacity is not None and c.capacity.starts else -1
    return (
        bool(c.blockers),
        len(c.blockers),
        len(c.unknowns),
        len(c.unverified),
        len(c.api_differences),
        -conc,
        c.engine,
    )


def choose(
    card: ModelCard,
    qc: dict[str, Any] | None,
    hw: Hardware,
    req: Requirements,
    probe: ProbeEvidence | None = None,
    engines: tuple[str, ...] = ENGINES,
    versions: dict[str, str] | None = None,
) -> ChooseResult:
    """The engines ranked for this model, hardware and requirements, each at its pinned release in `versions`
    (else the newest known)."""
    fmt, why = format_of_card(card, qc)
    pinned = versions or {}
    choices = sorted((assess(e, card, fmt, why, hw, req, probe, pinned.get(e)) for e in engines), key=_rank_key)
    for i, c in enumerate(choices, 1):
        c.rank = i
    notes = (
        [
            f"capacity is per replica of TP={hw.gpu_count} over all {hw.gpu_count} GPUs; weights "
            f"{card.weights.source or card.weights.origin}"
        ]
        if hw.device == "cuda"
        else []
    )
    if card.weights.warning:
        notes.append(card.weights.warning)
    notes.append("facts marked unverified were not read in the engine's source or docs (see the data files)")
    return ChooseResult(
        model=card.name,
        model_source=card.source,
        format=fmt,
        format_reason=why,
        hardware=hw,
        requirements=req,
        engines=choices,
        notes=notes,
    )
