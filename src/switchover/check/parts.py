"""What each part of the pre-flight does (check/registry.py lists them): most call another verb's Python API with
inputs picked from the migration file; the metrics part compares the two profiles' series and scrapes both /metrics,
the live-model part counts tokens through both servers, and plan sizes the new engine as the old launch ran. Each
returns its typed result; the rules judge them."""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from switchover.check.evidence import (
    ChatCount,
    ConfiguredGrace,
    GraceEvidence,
    LiveModel,
    MetricIntent,
    MetricsEvidence,
    MetricSide,
    PlanEvidence,
    TextCount,
)
from switchover.config import Endpoint, Migration
from switchover.config.check import CheckSection
from switchover.errors import SwitchoverError
from switchover.wire import EngineClient, Timeouts

if TYPE_CHECKING:  # the other verbs are imported when their part runs (a missing one is an "unavailable" part)
    from pydantic import BaseModel

    from switchover.evidence.bench import BenchReport
    from switchover.model.diff import ModelDiff
    from switchover.plan.capacity import CapacityResult
    from switchover.probe.report import ProbeReport
    from switchover.rollout.rollback_view import RollbackEvidence
    from switchover.verify.report import EquivalenceReport
    from switchover.wire.discovery import Discovered

Progress = Callable[[str], None]

# Texts for the live tokenizer comparison: English, Chinese (CJK splits differ most between tokenizers), code, JSON.
TEXTS = [
    "The quick brown fox jumps over the lazy dog while the lighthouse keeper reads the logs.",
    "换模型换的是四样东西：权重、tokenizer、chat template、采样参数默认值。",
    "def add(a: int, b: int) -> int:\n    return a + b  # 42",
    '{"name": "Ana", "age": 30, "tags": ["a", "b"], "ok": true}',
    "Numbers 1234567 and 3.14159, URLs https://example.com/a?b=c, emoji 🙂.",
]
CHATS: list[list[dict[str, str]]] = [
    [{"role": "user", "content": "Say hello."}],
    [{"role": "system", "content": "You are terse."}, {"role": "user", "content": "Say hello."}],
    [
        {"role": "user", "content": "Hi"},
        {"role": "assistant", "content": "Hello!"},
        {"role": "user", "content": "What is 2+2?"},
    ],
]


def engine_name(ep: Endpoint) -> str | None:
    """The engine profile name, None for a plain OpenAI-compatible server."""
    return None if ep.engine.value == "openai" else ep.engine.value


def _client(ep: Endpoint, timeout_s: float = 60.0) -> EngineClient:
    t = Timeouts(connect=5, first_byte=timeout_s, idle=timeout_s, total=timeout_s)
    return EngineClient(ep.url, api_key_env=ep.api_key_env, timeouts=t)


def open_clients(m: Migration) -> dict[str, EngineClient]:
    """One client per endpoint for the check's own requests (discovery, metrics, live model), closed by the caller."""
    return {"old": _client(m.old), "new": _client(m.new)}


@contextlib.asynccontextmanager
async def _pair(
    m: Migration, shared: dict[str, EngineClient] | None
) -> AsyncIterator[tuple[EngineClient, EngineClient]]:
    """The check's clients when it shares them, else two of this part's own (closed after it)."""
    if shared:
        yield shared["old"], shared["new"]
        return
    async with _client(m.old) as a, _client(m.new) as b:
        yield a, b


# ------------------------------------------------------------------------------------------------ plan
#: old-launch intents that size the new engine as they sized the old one (the memory knob is converted, not copied)
_SIZING = {
    "tensor_parallel_size": "tp",
    "pipeline_parallel_size": "pp",
    "max_context_length": "max_model_len",
    "max_concurrent_sequences": "max_num_seqs",
}


def plan_part(m: Migration, s: CheckSection, base: Path) -> PlanEvidence:
    from switchover.engines import load_profile
    from switchover.plan.translate import api_differences, translate

    ev = PlanEvidence()
    old_e, new_e = engine_name(m.old), engine_name(m.new)
    if old_e and new_e:
        ev.api_differences = api_differences(
            load_profile(old_e, m.old.engine_version), load_profile(new_e, m.new.engine_version)
        )
    else:
        ev.notes.append("no engine profile for a plain OpenAI server: API facts not compared")
    if s.plan.old_launch and old_e and new_e:
        ev.translation = translate(old_e, s.plan.old_launch, new_e)
    if s.plan.model_dir and (s.plan.gpu or s.plan.gpu_memory_gib) and new_e:
        ev.capacity = _plan_capacity(m, s, base, old_e, new_e)
        ev.notes += [f"capacity input {k}: {v}" for k, v in ev.capacity.input_sources.items()]
    else:
        ev.notes.append("capacity not planned: give check.plan.model_dir and check.plan.gpu (or gpu_memory_gib)")
    return ev


def _plan_capacity(m: Migration, s: CheckSection, base: Path, old_e: str | None, new_e: str) -> CapacityResult:
    """The new engine sized as the old launch ran (its TP, PP, max length and sequence cap; its memory knob
    converted to the new engine's meaning), by `plan capacity`'s own function; every input says where it came
    from."""
    from switchover.engines import load_profile
    from switchover.hardware.catalog import find_gpu
    from switchover.model.card import load_model_card
    from switchover.plan.capacity import Knobs, capacity
    from switchover.plan.launch import parse_launch

    gib, gpu_name = s.plan.gpu_memory_gib, None
    sources: dict[str, str] = {}
    if s.plan.gpu is not None:
        spec = find_gpu(str(s.plan.gpu))
        gpu_name, gib = spec.name, gib or spec.total_gib
        sources["gpu"] = f"{spec.name} (check.plan.gpu)"
    if s.plan.gpu_memory_gib is not None:
        sources["gpu memory"] = f"{s.plan.gpu_memory_gib:g} GiB (check.plan.gpu_memory_gib)"
    assert gib is not None  # the caller checked that one of the two is set
    card = load_model_card(_resolve(base, str(s.plan.model_dir)))
    new = load_profile(new_e, m.new.engine_version)
    kwargs: dict[str, Any] = {}
    knobs = Knobs()
    if s.plan.old_launch and old_e:
        old = load_profile(old_e, m.old.engine_version)
        values = parse_launch(old_e, s.plan.old_launch).values
        for intent, arg in _SIZING.items():
            if values.get(intent) is not None:
                kwargs[arg] = int(values[intent])
                sources[arg] = f"{kwargs[arg]} (old launch: {_flag_of(old, intent)})"
        knobs, knob_source = _converted_knob(card, old, new, gib, values, kwargs, m)
        if knob_source:
            sources["memory knob"] = knob_source
    for arg, default in (
        ("tp", "1 (no tensor parallelism in the old launch)"),
        ("max_model_len", "the model's max_position_embeddings (the old launch sets none)"),
    ):
        sources.setdefault(arg, default)
    version = m.new.engine_version
    sources["engine release"] = (
        f"{new_e} {version} (new.engine_version)"
        if version
        else f"{new_e}: new.engine_version is not set, so the newest known release is assumed"
    )
    result = capacity(card, new, gib, gpu_name=gpu_name, knobs=knobs, engine_version=version, **kwargs)
    return result.model_copy(update={"input_sources": sources})


def _flag_of(profile: Any, intent: str) -> str:
    spec = profile.flags.get(intent)
    return (spec.flag or spec.yaml_key or intent) if spec is not None else intent


def _converted_knob(
    card: Any, old: Any, new: Any, gib: float, values: dict[str, Any], kwargs: dict[str, Any], m: Migration
) -> tuple[Any, str | None]:
    """The new engine's memory knob that gives the old launch's KV pool (`plan translate --model --gpu`'s
    conversion), or the new engine's default when the old launch sets none or none reproduces it."""
    from switchover.plan.capacity import Knobs
    from switchover.plan.equivalence import equivalent_memory_knob

    fraction_intent = "gpu_memory_fraction"
    fraction = values.get(fraction_intent)
    if fraction is None or old.memory.budget == "explicit_context":
        return Knobs(), None
    if old.name == new.name:  # the same meaning: the old value is the new one
        return Knobs(memory_fraction=float(fraction)), f"{fraction} (old launch: {_flag_of(old, fraction_intent)})"
    eq = equivalent_memory_knob(
        card,
        old,
        new,
        gib,
        float(fraction),
        tp=kwargs.get("tp", 1),
        pp=kwargs.get("pp", 1),
        src_version=m.old.engine_version,
        dst_version=m.new.engine_version,
    )
    if eq is None:
        return Knobs(), (
            f"{new.name}'s default: no {new.name} setting reproduces the old launch's "
            f"{_flag_of(old, 'gpu_memory_fraction')} {fraction} pool"
        )
    if eq.intent == "max_context_length":
        return Knobs(context_tokens=int(eq.value)), f"{eq.value} tokens ({eq.explanation})"
    return Knobs(memory_fraction=float(eq.value)), f"{eq.value} ({eq.explanation})"


def _resolve(base: Path, p: str) -> Path:
    path = Path(p).expanduser()
    return path if path.is_absolute() else base / path


# ------------------------------------------------------------------------------------------------ metrics
async def metrics_part(m: Migration, shared: dict[str, EngineClient] | None = None) -> MetricsEvidence:
    from switchover.engines import load_profile

    old_e, new_e = engine_name(m.old), engine_name(m.new)
    # each side's series at the release it runs (a series renamed between releases is compared as it is served)
    po = load_profile(old_e, m.old.engine_version) if old_e else None
    pn = load_profile(new_e, m.new.engine_version) if new_e else None
    ev = MetricsEvidence(old_engine=old_e or "openai", new_engine=new_e or "openai")
    if po is not None and pn is not None:
        for intent in sorted(set(po.metrics) | set(pn.metrics)):
            a, b = po.metric(intent), pn.metric(intent)
            if a is None:
                status = "new_only"
            elif b is None:
                status = "missing_in_new"
            elif a.unit != b.unit:
                status = "unit"
            elif a.name != b.name:
                status = "renamed"
            elif (a.buckets or []) != (b.buckets or []):
                status = "buckets"
            else:
                status = "same"
            ev.intents.append(
                MetricIntent(
                    intent=intent,
                    old=a.name if a else None,
                    new=b.name if b else None,
                    old_unit=str(a.unit) if a else None,
                    new_unit=str(b.unit) if b else None,
                    status=status,
                )
            )
    async with _pair(m, shared) as (old_client, new_client):
        scraped = {
            "old": await old_client.request("GET", "/metrics", timeout=15),
            "new": await new_client.request("GET", "/metrics", timeout=15),
        }
    for side, ep, prof in (("old", m.old, po), ("new", m.new, pn)):
        res = scraped[side]
        if res.failure is not None or res.status != 200:
            reason = res.failure.message if res.failure else f"HTTP {res.status} on /metrics"
            setattr(ev, side, MetricSide(url=ep.url, reachable=False, reason=reason))
            continue
        text = res.body.decode(errors="replace") if isinstance(res.body, bytes) else str(res.body)
        names = [spec.name for spec in prof.metrics.values()] if prof else []
        exposed, why = _exposed(text, names)
        setattr(
            ev,
            side,
            MetricSide(
                url=ep.url,
                reachable=True,
                reason=why,
                families=text.count("# TYPE "),
                profile_names_found=[n for n in names if n in exposed],
                profile_names_missing=[n for n in names if n not in exposed],
            ),
        )
    return ev


def _exposed(text: str, names: list[str]) -> tuple[set[str], str | None]:
    """Which of `names` the /metrics text exposes as series (read by the bench's Prometheus parser, so a name is
    found only as a whole series name, a histogram's or counter's parts included); why none can be read."""
    from switchover.measure.prometheus import parse_metrics

    errors: list[str] = []
    rows = parse_metrics(text, {n: n for n in names}, endpoint="", t_ns=0, wall=0.0, errors=errors)
    return {str(r["intent"]) for r in rows}, (errors[0] if errors else None)


# ------------------------------------------------------------------------------------------------ live model
async def live_model_part(m: Migration, s: CheckSection, shared: dict[str, EngineClient] | None = None) -> LiveModel:
    ev = LiveModel()
    texts = s.live_model.texts or TEXTS
    async with _pair(m, shared) as (a, b):
        ma, mb = m.old.model, m.new.model  # as given, else as discovered (CheckRun fills them in)
        for text in texts:
            ia = await a.tokenize(text, ma, add_special=False)
            ib = await b.tokenize(text, mb, add_special=False)
            ev.texts.append(
                TextCount(
                    text=text,
                    old=len(ia) if ia is not None else None,
                    new=len(ib) if ib is not None else None,
                    same_ids=(ia == ib) if ia is not None and ib is not None else None,
                )
            )
        for side, ids in (("old", [t.old for t in ev.texts]), ("new", [t.new for t in ev.texts])):
            if all(i is None for i in ids):
                ev.notes.append(f"{side} server has no /tokenize")
        for messages in CHATS:
            row = ChatCount(messages=messages, old_prompt_tokens=None, new_prompt_tokens=None)
            for side, client, model in (("old", a, ma), ("new", b, mb)):
                rec = await client.chat(messages, model=model, max_tokens=1, temperature=0)
                if rec.failure is not None:
                    setattr(row, f"{side}_error", rec.failure.message)
                elif rec.usage is None or rec.usage.prompt_tokens is None:
                    setattr(row, f"{side}_error", "no usage.prompt_tokens in the response")
                else:
                    setattr(row, f"{side}_prompt_tokens", rec.usage.prompt_tokens)
            ev.chats.append(row)
    return ev


# ------------------------------------------------------------------------------------------------ diff-model
def diff_model_part(m: Migration, s: CheckSection, base: Path) -> ModelDiff:
    from switchover.model.diff import diff_models

    assert s.diff_model.old and s.diff_model.new
    d = diff_models(
        _resolve(base, s.diff_model.old),
        _resolve(base, s.diff_model.new),
        old_engine=engine_name(m.old),
        new_engine=engine_name(m.new),
    )
    return d


# ------------------------------------------------------------------------------------------------ probe
def target(ep: Endpoint, found: Discovered | None) -> Any:
    """One side as the probe and verify verbs take it: its engine at its release, and the discovery already made
    (so the verb does not list the models again)."""
    from switchover.wire.discovery import Target

    return Target(
        ep.url, ep.model, ep.api_key_env, engine=engine_name(ep), engine_version=ep.engine_version, discovered=found
    )


async def probe_part(
    m: Migration, s: CheckSection, progress: Progress, found: dict[str, Discovered] | None = None
) -> ProbeReport:
    from switchover.probe import ProbeOptions, run_probes, select

    found = found or {}
    probes = select(s.probe.only, s.probe.skip)
    opts = ProbeOptions(api=s.probe.api, time_budget_s=s.probe.budget_s)  # type: ignore[arg-type]
    # each side's engine: its profile's expectations are checked, as `switchover probe --old-engine` does
    return await run_probes(
        target(m.old, found.get("old")), target(m.new, found.get("new")), probes, opts, on_progress=progress
    )


# ------------------------------------------------------------------------------------------------ verify
def _spread(cases: list[Any], n: int | None) -> list[Any]:
    """At most n prompts, taken round-robin over their kinds (English, Chinese, code, JSON ...)."""
    if n is None or len(cases) <= n:
        return cases
    kinds: dict[str, list[Any]] = {}
    for c in cases:
        kinds.setdefault(c.kind, []).append(c)
    out: list[Any] = []
    while len(out) < n:
        for group in kinds.values():
            if group and len(out) < n:
                out.append(group.pop(0))
    return out


async def verify_part(
    m: Migration, s: CheckSection, base: Path, progress: Progress, found: dict[str, Discovered] | None = None
) -> EquivalenceReport:
    from switchover.verify import BUILTIN, VerifyOptions, load_jsonl, run_verify

    found = found or {}
    cases = load_jsonl(_resolve(base, s.verify.prompts)) if s.verify.prompts else list(BUILTIN)
    opts = VerifyOptions(structured=s.verify.structured, long_inputs=s.verify.long_inputs)
    return await run_verify(
        target(m.old, found.get("old")),
        target(m.new, found.get("new")),
        _spread(cases, s.verify.max_prompts),
        opts,
        on_progress=progress,
    )


# ------------------------------------------------------------------------------------------------ bench
class _BenchProgress:
    def __init__(self, progress: Progress) -> None:
        self.progress = progress
        self.label = ""
        self.done = 0
        self.total: int | None = None

    def note(self, msg: str) -> None:
        self.progress(msg)

    def step_started(self, label: str, total: int | None) -> None:
        self.label, self.done, self.total = label, 0, total
        self.progress(f"bench {label}")

    def request_done(self, ok: bool) -> None:
        self.done += 1
        self.progress(f"bench {self.label}: {self.done}/{self.total or '?'}")

    def step_done(self, summary: Any) -> None:
        pass


async def bench_part(m: Migration, s: CheckSection, run_path: Path, progress: Progress) -> tuple[BenchReport, Path]:
    from switchover.bench.report import write_report
    from switchover.bench.runner import BenchRun
    from switchover.evidence.bench import BenchPlan, EndpointSpec
    from switchover.runs import RunDir

    b = s.bench
    plan = BenchPlan(
        name=f"{s.name}-bench",
        endpoints=[
            EndpointSpec(
                label="old", url=m.old.url, engine=engine_name(m.old), model=m.old.model, api_key_env=m.old.api_key_env
            ),
            EndpointSpec(
                label="new", url=m.new.url, engine=engine_name(m.new), model=m.new.model, api_key_env=m.new.api_key_env
            ),
        ],
        api=b.api,  # type: ignore[arg-type]
        buckets=b.buckets,
        output_tokens=b.output_tokens,
        concurrency=b.concurrency,
        requests=b.requests,
        timeout_s=b.timeout_s,
        calibrate=False,
    )
    if m.bench is not None:
        plan.slos = m.bench.slos
    runner = BenchRun(plan, run_path, _BenchProgress(progress))
    report, rd = await runner.run()
    if not rd.has("report.html"):
        write_report(RunDir.open(rd.path), report)
    return report, rd.path


# ------------------------------------------------------------------------------------------------ grace
def grace_part(
    m: Migration, s: CheckSection, base: Path, bench_dir: Path | None, bench_report: BaseModel | None = None
) -> GraceEvidence:
    """Drain grace from the bench part's latencies: its report as passed in memory, else its summary.json."""
    from switchover.plan.grace import latency_from_steps, required_grace
    from switchover.plan.grace_files import latency_from_bench, scan

    g = s.grace
    ev = GraceEvidence(max_tokens=g.max_tokens, client_timeout_s=g.client_timeout_s)
    if g.drain_grace_s is not None:
        ev.configured.append(
            ConfiguredGrace(name="check.grace.drain_grace_s", value_s=g.drain_grace_s, source="switchover.yaml")
        )
    if m.gateway is not None:
        ev.configured.append(
            ConfiguredGrace(name="gateway.drain_seconds", value_s=m.gateway.drain_seconds, source="switchover.yaml")
        )
    if bench_dir is None:
        ev.missing = "no bench run in this check to measure TPOT p99 (enable check.bench)"
        return ev
    if bench_report is not None:
        steps = bench_report.model_dump(mode="json").get("steps")
        tpot, ttft, src = latency_from_steps(steps, f"bench {bench_dir.name}", str(bench_dir / "summary.json"))
    else:
        tpot, ttft, src = latency_from_bench(bench_dir)
    ev.tpot_p99_ms, ev.ttft_p99_ms, ev.latency_source = round(tpot, 3), None if ttft is None else round(ttft, 3), src
    if g.max_tokens is None:
        ev.missing = "check.grace.max_tokens not set (the longest generation the API allows)"
        return ev
    need = required_grace(g.max_tokens, tpot, ttft, g.margin_s, source=src)
    ev.need = need
    if g.deploy_dir:
        ev.findings = scan(_resolve(base, g.deploy_dir), need, ev.skipped)
    return ev


def rollback_part(m: Migration, config_path: Path | None) -> RollbackEvidence:
    """The way back: the last drill, the rollback prerequisites (old's readiness checked now), the holding window."""
    if config_path is None:
        raise SwitchoverError("the rollback part reads the rollout of a migration file; none was given")
    from switchover.rollout.rollback_view import rollback_evidence

    return rollback_evidence(m, config_path)
