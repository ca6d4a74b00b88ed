"""Small, explicit evidence for the rule tables: each builder makes the typed result another verb would write."""

from __future__ import annotations

from typing import Any

from switchover.check.evidence import (
    ChatCount,
    CheckConfig,
    ConfiguredGrace,
    Evidence,
    GraceEvidence,
    LiveModel,
    MetricIntent,
    MetricsEvidence,
    MetricSide,
    TextCount,
)
from switchover.config.bench import BenchSlos
from switchover.config.check import CheckSection
from switchover.evidence.bench import AbStep, BenchPlan, BenchReport, EndpointSpec
from switchover.evidence.bench_findings import KneeResult, MetricDelta
from switchover.evidence.bench_step import StepSummary
from switchover.evidence.check import EndpointSummary, PartRun
from switchover.measure.distribution import Dist
from switchover.model.diff import ModelDiff, ModelFacts, Reason
from switchover.model.generation import GenerationDefaults, GenerationDiff
from switchover.model.template import Markers, RenderDiff, Template, TemplateDiff
from switchover.model.tokenizer import TokenizerDiff, TokenizerInfo
from switchover.model.weights import WeightsFingerprint
from switchover.probe.report import EndpointInfo, Observation, ProbeReport, ProbeResult
from switchover.verify.divergence import Divergence, GreedySummary
from switchover.verify.report import (
    Boundary,
    EquivalenceReport,
    LongInputCheck,
    LongInputSide,
    StructuredCase,
    StructuredSide,
)

OLD, NEW = "http://old", "http://new"


def evidence(**parts: Any) -> Evidence:
    settings = parts.pop("settings", None) or CheckSection()
    cfg = CheckConfig(
        endpoints=[
            EndpointSummary(role="old", url=OLD, engine="vllm"),
            EndpointSummary(role="new", url=NEW, engine="llamacpp"),
        ],
        settings=settings,
        slos=BenchSlos(**parts.pop("slos", {})),
    )
    ev = Evidence(config=cfg)
    for name, value in parts.items():
        setattr(ev, name, value)
        ev.parts[name.removesuffix("_dir")] = PartRun(part=name, status="ran")
    return ev


def probe_result(
    pid: str, category: str, verdict: str, *, breaking: bool = True, old: str = "a", new: str = "b"
) -> ProbeResult:
    return ProbeResult(
        id=pid,
        title=pid,
        category=category,
        request="r",
        observes="o",
        breaking=breaking,
        breaks="clients break",
        old=Observation(summary=old),
        new=Observation(summary=new),
        verdict=verdict,
        breaking_difference=breaking and verdict == "differs",
    )  # type: ignore[arg-type]


def probe(*results: ProbeResult) -> ProbeReport:
    return ProbeReport(old=EndpointInfo(url=OLD), new=EndpointInfo(url=NEW), results=list(results))


def _dist(p99: float) -> Dist:
    return Dist(count=10, mean=p99 / 2, std=1, min=1, max=p99, p50=p99 / 2, p90=p99, p95=p99, p99=p99)


def step(
    endpoint: str, c: int, *, error_rate: float = 0.0, tok_s: float = 100.0, ttft: float = 50.0, tpot: float = 10.0
) -> StepSummary:
    return StepSummary(
        endpoint=endpoint,
        step=c,
        concurrency=c,
        bucket="128",
        requests=10,
        warmup=1,
        ok=10,
        failed=0,
        duration_s=1.0,
        req_per_s=1.0,
        out_tok_per_s=tok_s,
        chunks_per_s=1.0,
        error_rate=error_rate,
        ttft_ms=_dist(ttft),
        tpot_ms=_dist(tpot),
    )


def delta(metric: str, old: float, new: float, *, significant: bool, p: float = 0.01) -> MetricDelta:
    return MetricDelta(
        metric=metric,
        stat="p99",
        old=old,
        new=new,
        delta_pct=(new / old - 1) * 100,
        p_value=p,
        significant=significant,
        n_old=10,
        n_new=10,
    )


def bench(
    steps: list[StepSummary], ab: list[AbStep] | None = None, knees: dict[str, KneeResult] | None = None
) -> BenchReport:
    plan = BenchPlan(endpoints=[EndpointSpec(label="old", url=OLD), EndpointSpec(label="new", url=NEW)], requests=10)
    return BenchReport(name="b", created_wall=0.0, plan=plan, endpoints=[], steps=steps, ab=ab or [], knees=knees or {})


def ab(c: int, *deltas: MetricDelta) -> AbStep:
    return AbStep(bucket="128", step=c, concurrency=c, deltas=list(deltas))


def knee(found: bool, c: float | None = None) -> KneeResult:
    return KneeResult(metric="tpot p99", found=found, concurrency=c, message="no knee" if not found else "knee")


def verify(
    *,
    longest: tuple[int | None, int | None] = (2000, 2000),
    structured: tuple[int, int] = (3, 3),
    new_unanswered: int = 0,
    new_loop: bool = False,
    flags: list[str] | None = None,
    identical: bool = True,
) -> EquivalenceReport:
    div = Divergence(
        id="p1", kind="english", identical=identical, flags=flags or [], common_prefix="abc", old_chars=10, new_chars=10
    )
    sides = []
    for url, lo, loop in ((OLD, longest[0], False), (NEW, longest[1], new_loop)):
        sides.append(
            LongInputSide(
                url=url,
                context=2048,
                boundary=Boundary(configured_context=2048, longest_ok_prompt_tokens=lo),
                checks=[LongInputCheck(target_fraction=0.6, status="ok", loop=loop)],
            )
        )
    return EquivalenceReport(
        old_url=OLD,
        new_url=NEW,
        model_old="m",
        model_new="m",
        greedy=[div],
        summary=GreedySummary(prompts=1, identical=int(identical), flagged=int(bool(flags)), failed=0),
        structured=[
            StructuredSide(url=OLD, cases=[], valid=structured[0], total=3),
            StructuredSide(
                url=NEW,
                valid=structured[1],
                total=3 + new_unanswered,
                cases=[
                    StructuredCase(id=f"u{i}", status="error", reason="first_byte_timeout")
                    for i in range(new_unanswered)
                ],
            ),
        ],
        long_inputs=sides,
    )


def metrics(*, new_reachable: bool = True, status: str = "same") -> MetricsEvidence:
    return MetricsEvidence(
        old_engine="vllm",
        new_engine="llamacpp",
        intents=[MetricIntent(intent="running", old="vllm:num_requests_running", new="x", status=status)],
        old=MetricSide(url=OLD, reachable=True, families=30),
        new=MetricSide(
            url=NEW,
            reachable=new_reachable,
            families=20 if new_reachable else 0,
            reason=None if new_reachable else "HTTP 404 on /metrics",
        ),
    )


def live(
    texts: list[tuple[int | None, int | None, bool | None]], chats: list[tuple[int | None, int | None]] | None = None
) -> LiveModel:
    return LiveModel(
        texts=[TextCount(text=f"t{i}", old=a, new=b, same_ids=s) for i, (a, b, s) in enumerate(texts)],
        chats=[
            ChatCount(messages=[{"role": "user", "content": "hi"}], old_prompt_tokens=a, new_prompt_tokens=b)
            for a, b in (chats or [])
        ],
    )


def grace(
    *,
    tpot: float | None = 35.0,
    max_tokens: int | None = 2000,
    configured: list[float] | None = None,
    client_timeout: float | None = None,
) -> GraceEvidence:
    from switchover.plan.grace import required_grace

    g = GraceEvidence(
        max_tokens=max_tokens,
        tpot_p99_ms=tpot,
        ttft_p99_ms=0.0 if tpot else None,
        client_timeout_s=client_timeout,
        configured=[ConfiguredGrace(name="drain", value_s=v, source="test") for v in configured or []],
    )
    if tpot and max_tokens:
        g.need = required_grace(max_tokens, tpot, 0.0)
    else:
        g.missing = "no TPOT"
    return g


def _weights(digest: str | None) -> WeightsFingerprint | None:
    if digest is None:
        return None
    return WeightsFingerprint(
        source="m",
        format="safetensors",
        files=["m.safetensors"],
        tensors=1,
        params=1,
        bytes_hashed=1,
        hash=digest,
        seconds=0.0,
    )


def diff_model(
    *,
    weights: tuple[str | None, str | None] = ("a", "a"),
    quantization: tuple[str | None, str | None] = ("BF16", "BF16"),
    tokenizer_same: bool = True,
    total_ratio: float | None = None,
    changed_renders: tuple[str, ...] = (),
    file_changes: dict[str, tuple[Any, Any]] | None = None,
    notes: list[str] | None = None,
    reasons: list[Reason] | None = None,
) -> ModelDiff:
    """What `diff-model` reports, with only the facts the rules read set apart from neutral values."""
    tok = TokenizerInfo(source="m", kind="hf", vocab_size=100, fingerprint="f")
    tpl = Template(source="m", text="{{ messages }}")
    renders = [RenderDiff(conversation=c, old="a", new="b", same=False) for c in changed_renders]
    gen = GenerationDefaults(source="m", origin=None)
    wo, wn = weights
    return ModelDiff(
        old=ModelFacts(source="old", quantization=quantization[0]),
        new=ModelFacts(source="new", quantization=quantization[1]),
        tokenizer=TokenizerDiff(
            old=tok, new=tok, same=tokenizer_same, vocab_shared=100, vocab_moved=0, total_ratio=total_ratio
        ),
        template=TemplateDiff(
            old=tpl,
            new=tpl,
            same_text=not renders,
            same_renders=not renders,
            renders=renders,
            old_markers=Markers(system="own turn"),
            new_markers=Markers(system="own turn"),
        ),
        generation=GenerationDiff(old=gen, new=gen, file_changes=file_changes or {}, notes=notes or []),
        weights_old=_weights(wo),
        weights_new=_weights(wn),
        weights_same=None if wo is None or wn is None else wo == wn,
        verdict="hot switch possible",
        reasons=reasons or [],
    )


def write_run(base: Any, ev: Evidence, name: str = "check") -> Any:
    """A check run directory holding this evidence, as CheckRun would have left it."""
    from switchover.runs import RunDir

    rd = RunDir.create(base, name)
    rd.write_json("config", ev.config)
    rd.write_json("parts", [p.model_dump() for p in ev.parts.values()])
    for part in ("plan", "probe", "verify", "live_model", "metrics", "diff_model", "grace", "rollback"):
        value = getattr(ev, part)
        if value is not None:
            rd.write_json(part, value)
    if ev.bench is not None:
        sub = RunDir.create(rd.path, "check-bench")
        sub.write_json("summary", ev.bench)
    return rd


def full_evidence(**overrides: Any) -> Evidence:
    """Evidence where every item can be judged; override parts to steer verdicts."""
    parts: dict[str, Any] = {
        "bench": bench(
            [step("old", 1), step("new", 1), step("old", 2), step("new", 2)],
            [ab(1, delta("ttft", 100, 105, significant=False, p=0.5))],
        ),
        "probe": probe(
            probe_result("stop.count", "stop", "same"),
            probe_result("usage.x", "usage", "same"),
            probe_result("sampling.defaults", "sampling", "same"),
            probe_result("error.malformed", "errors", "same"),
            probe_result("length.over_context", "length", "same"),
        ),
        "verify": verify(),
        "metrics": metrics(),
        "live_model": live([(10, 10, True)], [(20, 20)]),
        "grace": grace(configured=[120.0], client_timeout=200.0),
    }
    parts.update(overrides)
    return evidence(**parts)
