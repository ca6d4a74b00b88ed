"""KV pool, tokens and concurrency under each engine's memory semantics (docs/plan.md#capacity): the one
capacity model every verb calls (`plan capacity`, `plan canary`, `plan choose`, `plan parallel`, `check`'s plan
part, `doctor`'s figures, the memory-knob conversion of `plan translate`).

The formula is chosen by the profile's `memory.budget` kind, never by engine name, and the overheads come from the
profile's overhead model for the engine release planned for (the newest known when none is named, and said).
Instances on one GPU are simulated in start order, so the same function answers "one copy" and "two copies"
(canary) questions: each instance sees only the memory the earlier ones left free (`other_residents_gib`).
"""

from __future__ import annotations

import math
import re

from pydantic import BaseModel, Field

from switchover.engines import EngineProfile
from switchover.errors import BadInput
from switchover.model.card import ModelCard
from switchover.plan.fit import FitAdvice
from switchover.plan.instance import (
    GIB,
    Instance,
    Knobs,
    Overheads,
    pick_tier,
    resolve_overheads,
    sglang_style_auto_fraction,
    start_instance,
)
from switchover.plan.kv import KVLayout, kv_layout
from switchover.plan.overhead import EngineVersion, ModelledOverheads, model_overheads, resolve_version
from switchover.plan.pipeline import placement
from switchover.plan.uncertainty import PoolRange, pool_range
from switchover.plan.weight_format import WeightFormat

__all__ = [
    "GIB",
    "CapacityResult",
    "ContextRow",
    "Instance",
    "Knobs",
    "Overheads",
    "batched_tokens_cap",
    "capacity",
    "resident_gib",
    "resolve_overheads",
    "scheduler_cap",
    "sglang_style_auto_fraction",
    "start_instance",
    "weights_per_gpu_gib",
]


def weights_per_gpu_gib(card: ModelCard, tp: int, pp: int, ep: int = 1) -> float:
    """Weights per GPU: sharded parts / TP, replicated parts (norms, routers, MLA down-projections, K/V past the
    KV heads) whole, then / PP (docs/plan.md#capacity); prefer a logged figure."""
    return card.weights.per_rank_bytes(tp) / pp / GIB


def _tier_value(profile: EngineProfile, key: str, total_gib: float, gpu_name: str | None) -> int | None:
    """A tiered default (e.g. max_num_batched_tokens_by_memory), or None when the profile has none."""
    table = profile.defaults.get(key)
    value = pick_tier(table.value, total_gib, gpu_name) if table else None
    return int(value) if isinstance(value, int | float) else None


def _tier_excludes(profile: EngineProfile, total_gib: float) -> bool:
    """Whether a tier that applies at this memory size excludes some GPU names (so the name matters)."""
    for item in profile.defaults.values():
        if isinstance(item.value, dict):
            for key in item.value:
                m = re.match(r"\s*>=\s*(\d+)\s*GI?B\s*\(not ", str(key), re.I)
                if m and total_gib >= float(m.group(1)):
                    return True
    return False


def scheduler_cap(
    profile: EngineProfile, total_gib: float, gpu_name: str | None, tokens: int, context: int
) -> tuple[int | None, str]:
    """The engine's default running-sequence cap, from profile data, with where it came from."""
    flag = profile.flags.get("max_concurrent_sequences")
    if flag is not None and isinstance(flag.default, int) and flag.default > 0:
        return flag.default, flag.source
    d = profile.defaults
    if "max_num_seqs_by_memory" in d:
        table = d["max_num_seqs_by_memory"]
        return int(pick_tier(table.value, total_gib, gpu_name)), table.source
    if "max_running_requests_auto" in d and context > 0:  # min(max(min(cap/ctx*512, 4096), 2048), cap//2)
        value = min(max(min(tokens / context * 512, 4096), 2048), tokens // 2)
        return int(value), d["max_running_requests_auto"].source
    if "parallel_auto" in d:
        return int(d["parallel_auto"].value["slots"]), d["parallel_auto"].source
    if "max_concurrent_requests" in d:
        return int(d["max_concurrent_requests"].value), d["max_concurrent_requests"].source
    return None, "no cap"


def batched_tokens_cap(profile: EngineProfile, total_gib: float, gpu_name: str | None) -> tuple[int | None, str]:
    """Default tokens-per-step cap when it also bounds decode (vLLM, TRT-LLM), else None."""
    d = profile.defaults
    if "batched_tokens_cap_decode" not in d:
        return None, "does not cap decode"
    flag = profile.flags.get("max_batched_tokens_per_step")
    if flag is not None and isinstance(flag.default, int):
        return flag.default, flag.source
    if "max_num_batched_tokens_by_memory" in d:
        table = d["max_num_batched_tokens_by_memory"]
        return int(pick_tier(table.value, total_gib, gpu_name)), table.source
    return None, "unknown"


class ContextRow(BaseModel):
    """One row of the max_model_len <-> concurrency trade-off."""

    max_model_len: int
    kv_concurrency: float
    concurrency: int
    binding: str


class CapacityResult(BaseModel):
    """KV capacity of one engine instance for one model on one GPU layout."""

    engine: str
    budget: str
    gpu_total_gib: float
    tp: int
    pp: int
    instance: Instance
    overheads: Overheads
    overhead_model: ModelledOverheads | None = Field(default=None, description="drivers behind the overheads")
    weights_source: str = Field(default="", description="where the weight bytes came from")
    range: PoolRange | None = Field(
        default=None,
        description="tokens range from the planner's own residuals on logged start-ups (None: see range_missing)",
    )
    range_missing: str | None = Field(
        default=None,
        description="why there is no range: not measured for this "
        "engine and model kind, or the pool was set explicitly",
    )
    layout: KVLayout
    page_tokens: int
    num_blocks: int
    tokens: int
    max_model_len: int
    context: int
    kv_concurrency: float = Field(description="requests of `context` tokens the pool holds at once")
    limits: dict[str, int | None]
    limit_sources: dict[str, str]
    max_concurrency: int
    binding_limit: str
    table: list[ContextRow]
    weight_format: WeightFormat | None = Field(
        default=None,
        description="the format matrix's verdict for these weights on this engine and GPU (set by the CLI)",
    )
    engine_version: EngineVersion | None = Field(
        default=None,
        description="the engine release planned for and how it was chosen (the newest known when none was named)",
    )
    other_residents_gib: float = Field(
        default=0.0, description="memory other processes (an earlier copy) held on the GPU when this instance started"
    )
    input_sources: dict[str, str] = Field(
        default_factory=dict,
        description="where each planning input came from "
        "(a flag, the old launch, the migration file, an engine default)",
    )
    fit: FitAdvice | None = Field(
        default=None,
        description="fits or not in one line, and the single changes that "
        "would make it fit (set by the CLI: plan/fit.py)",
    )
    warnings: list[str] = Field(default_factory=list)


def resident_gib(result: CapacityResult) -> float:
    """What one started instance holds on its GPU as another process sees it: its footprint plus what the process
    held before it measured the free memory it budgets from (CUDA context, distributed init)."""
    held_before = result.gpu_total_gib - result.other_residents_gib - result.instance.free_at_start_gib
    return result.instance.footprint_gib + max(held_before, 0.0)


def _kv_concurrency(
    layout: KVLayout, blocks: int, page: int, context: int, slack: int = 0, state_pages: int = 1
) -> float:
    per_block = page * (layout.bytes_per_token + layout.sliding_bytes_per_token)
    need = layout.request_bytes(context, page, slack, state_pages) / per_block if per_block else math.inf
    return blocks / need if need else math.inf


class _Limits(BaseModel):
    """What bounds concurrency at one context length: the pool, and the scheduler's caps."""

    explicit: bool
    layout: KVLayout
    tokens: int
    blocks: int
    page: int
    slack: int
    state_pages: int
    seq_cap: int | None
    tok_cap: int | None

    def at(self, context: int) -> tuple[float, int, str]:
        """(requests the pool holds, the binding concurrency, which limit binds) at `context` tokens."""
        if self.explicit:
            kvc = float(self.tokens // context) if context else 0.0
        else:
            kvc = _kv_concurrency(self.layout, self.blocks, self.page, context, self.slack, self.state_pages)
        caps = {"kv": math.floor(kvc)}
        if self.seq_cap:
            caps["max_num_seqs"] = self.seq_cap
        if self.tok_cap:
            caps["max_batched_tokens"] = self.tok_cap
        low = min(caps.values())
        return kvc, low, "+".join(k for k, v in caps.items() if v == low)

    def table(self, mml: int) -> list[ContextRow]:
        """The max_model_len <-> concurrency trade-off at 1K, 2K, 4K ... up to `mml`, and `mml` itself."""
        lengths = {mml}
        c = 1024
        while c <= mml:
            lengths.add(c)
            c *= 2
        rows = []
        for length in sorted(lengths):
            k, n, b = self.at(length)
            rows.append(ContextRow(max_model_len=length, kv_concurrency=round(k, 3), concurrency=n, binding=b))
        return rows


def _input_warnings(
    card: ModelCard,
    profile: EngineProfile,
    layout: KVLayout,
    *,
    gpu_total_gib: float,
    gpu_name: str | None,
    version: EngineVersion,
    weights_gib: float | None,
    draft_layers: int,
) -> list[str]:
    """What the inputs leave unknown or assumed: the engine release, config notes, weights, the GPU tier."""
    warnings = [*([version.note] if version.note else []), *card.notes, *layout.notes]
    if card.weights.warning and weights_gib is None:
        warnings.append(card.weights.warning)
    if draft_layers and card.attention.draft_layers and weights_gib is None:
        warnings.append(
            f"the {card.attention.draft_layers} MTP layer(s) in the checkpoint are loaded for speculative "
            "decoding but not counted in the weights: pass --weights-gib from the log"
        )
    if gpu_name is None and _tier_excludes(profile, gpu_total_gib):
        warnings.append(
            "engine defaults by GPU tier (max_num_seqs, batched tokens) assume the GPU is not one the "
            "engine treats apart (e.g. vLLM's A100/GB10 rule): name it with --gpu"
        )
    return warnings


def _overhead_warnings(
    profile: EngineProfile, over: Overheads, modelled: ModelledOverheads | None, overrides: dict[str, float] | None
) -> list[str]:
    """Overheads counted as 0 because nothing models them, and an unverified CUDA-graph default."""
    if profile.memory.budget == "explicit_context":
        return []
    out = [
        f"{name} overhead is not modelled for {profile.name}: pass --overhead {name}=GIB"
        for name, src in over.sources.items()
        if src.startswith("not modelled")
    ]
    cuda_graph = profile.memory.overheads.get("cuda_graph")
    if (
        cuda_graph is not None
        and not cuda_graph.verified
        and "cuda_graph" not in (overrides or {})
        and modelled is None
    ):
        out.append(f"CUDA-graph estimate not subtracted ({cuda_graph.note}); --overhead cuda_graph=GIB")
    return out


def _page_tokens(profile: EngineProfile, layout: KVLayout, page_tokens: int | None) -> tuple[int, str | None]:
    """Tokens per KV block: the user's, else the profile's, grown for hybrids under page-size unification."""
    page = page_tokens or profile.memory.page_tokens
    unified = layout.unified_page_tokens(page) if profile.memory.hybrid_page_unification else None
    if page_tokens is None and unified and unified > page:
        return unified, (
            f"hybrid model: the attention block grows to {unified} tokens so one page holds a layer's "
            f"recurrent state ({profile.display_name} page-size unification)"
        )
    return page, None


def _refuse_below_one_request(
    profile: EngineProfile, inst: Instance, one: float, tokens: int, mml: int
) -> tuple[Instance, str | None]:
    """A started pool that cannot hold one max_model_len request: a warning, and a refusal where the engine
    refuses (vllm 0.32.0 kv_cache_utils.check_enough_kv_cache_memory)."""
    if one >= 1 or not inst.starts:
        return inst, None
    problem = (
        f"the pool ({tokens} tokens) cannot hold one request of max_model_len {mml}: lower "
        "--max-model-len or raise the memory knob"
    )
    if profile.memory.refuses_below_one_request:
        inst = inst.model_copy(
            update={"starts": False, "problem": f"{problem} ({profile.display_name} refuses to start)"}
        )
    return inst, problem


def _range_of(
    profile: EngineProfile, card: ModelCard, knobs: Knobs, tokens: int
) -> tuple[PoolRange | None, str | None]:
    """The tokens range from the planner's own evaluation residuals, or why there is none."""
    if profile.memory.budget == "explicit_context" or knobs.kv_pool_gib is not None:
        return None, "the pool size is set explicitly, not predicted"
    dense = card.family == "dense" and card.moe is None
    found = pool_range(profile.name, dense, tokens)
    if found is not None:
        return found, None
    return None, (
        f"not measured: no evaluated start-up logs for {profile.name} with "
        f"{'dense' if dense else 'MoE, MLA, sliding or hybrid'} models (bench/plan_accuracy.py), so the "
        "error of this prediction is unknown"
    )


def _modelled(
    profile: EngineProfile,
    card: ModelCard,
    *,
    gpu_total_gib: float,
    gpu_name: str | None,
    tp: int,
    mml: int,
    max_num_seqs: int | None,
    tok_cap: int | None,
    engine_version: str | None,
    eager: bool,
) -> ModelledOverheads | None:
    """The profile's overhead model at the engine's own defaults for this GPU (max_num_seqs, batched tokens)."""
    profile_seqs = max_num_seqs or (
        scheduler_cap(profile, gpu_total_gib, gpu_name, 0, 0)[0]
        if "max_running_requests_auto" not in profile.defaults
        else None
    )
    step_tokens = tok_cap or _tier_value(profile, "max_num_batched_tokens_by_memory", gpu_total_gib, gpu_name)
    return model_overheads(
        profile,
        card,
        version=engine_version,
        tp=tp,
        seqs=profile_seqs,
        batched_tokens=step_tokens,
        max_model_len=mml,
        eager=eager,
    )


def _free_at_start(
    profile: EngineProfile,
    modelled: ModelledOverheads | None,
    gpu_total_gib: float,
    free_gib: float | None,
    other_residents_gib: float,
) -> float:
    """Memory free when the instance takes its budget: as given, else the total less what the process holds first
    (the version's baseline, else the profile's CUDA context), less what other processes already hold."""
    if free_gib is None and modelled is not None and modelled.baseline_held_gib is not None:
        free_gib = gpu_total_gib - modelled.baseline_held_gib  # the version's own baseline (context, dist init)
    elif free_gib is None and profile.memory.cuda_context_gib is not None:
        free_gib = gpu_total_gib - profile.memory.cuda_context_gib
    return (gpu_total_gib if free_gib is None else free_gib) - other_residents_gib


def capacity(
    card: ModelCard,
    profile: EngineProfile,
    gpu_total_gib: float,
    *,
    gpu_name: str | None = None,
    tp: int = 1,
    pp: int = 1,
    kv_dtype: str = "auto",
    knobs: Knobs | None = None,
    max_model_len: int | None = None,
    context: int | None = None,
    max_num_seqs: int | None = None,
    max_batched_tokens: int | None = None,
    page_tokens: int | None = None,
    weights_gib: float | None = None,
    overheads: dict[str, float] | None = None,
    free_gib: float | None = None,
    slots: int | None = None,
    engine_version: str | None = None,
    eager: bool = False,
    draft_layers: int = 0,
    other_residents_gib: float = 0.0,
) -> CapacityResult:
    """KV pool, blocks, tokens, concurrency at `context` and the binding limit, for one instance of `profile` at
    `engine_version` (None: the profile's resolved release, else the newest known, said in the warnings).
    `draft_layers`: MTP/EAGLE layers that run for speculative decoding and keep KV in the same pool;
    `other_residents_gib`: memory other processes (an earlier canary copy) already hold on the GPU."""
    knobs = knobs or Knobs()
    version = resolve_version(profile, engine_version)
    layout = kv_layout(
        card, tp, pp, kv_dtype, mla_bytes=profile.memory.mla_kv_bytes_per_layer, draft_layers=draft_layers
    )
    tok_cap, tok_src = (
        (max_batched_tokens, "user") if max_batched_tokens else batched_tokens_cap(profile, gpu_total_gib, gpu_name)
    )
    mml = max_model_len or card.max_position_embeddings
    if not mml:
        raise BadInput(f"{card.name}: config has no max_position_embeddings; pass --max-model-len")
    ctx = context or mml
    if ctx > mml:
        raise BadInput(f"context {ctx} exceeds max_model_len {mml}")
    modelled = _modelled(
        profile,
        card,
        gpu_total_gib=gpu_total_gib,
        gpu_name=gpu_name,
        tp=tp,
        mml=mml,
        max_num_seqs=max_num_seqs,
        tok_cap=tok_cap,
        engine_version=version.version,
        eager=eager,
    )
    over = resolve_overheads(profile, overheads, tok_cap, modelled)
    if knobs.memory_fraction is None and modelled is not None and modelled.default_fraction is not None:
        knobs = knobs.model_copy(update={"memory_fraction": modelled.default_fraction})
    free = _free_at_start(profile, modelled, gpu_total_gib, free_gib, other_residents_gib)
    warnings = _input_warnings(
        card,
        profile,
        layout,
        gpu_total_gib=gpu_total_gib,
        gpu_name=gpu_name,
        version=version,
        weights_gib=weights_gib,
        draft_layers=draft_layers,
    )
    explicit = profile.memory.budget == "explicit_context"
    if explicit and knobs.context_tokens is None:
        knobs = knobs.model_copy(update={"context_tokens": mml * (slots or 1)})
    if weights_gib is not None:
        w = weights_gib
    elif pp > 1:  # every GPU must hold its heaviest stage: embedding first, norm/lm_head last
        w = placement(card, profile.name, version.version, tp, pp).heaviest_gib
    else:
        w = weights_per_gpu_gib(card, tp, pp)
    inst = start_instance(profile, free, gpu_total_gib, w, over, layout, knobs, tp, pp)
    page, page_note = _page_tokens(profile, layout, page_tokens)
    warnings += [page_note] if page_note else []
    per_block = page * (layout.bytes_per_token + layout.sliding_bytes_per_token)
    if explicit:
        tokens = blocks = knobs.context_tokens or 0
        page = 1
    else:
        blocks = int(inst.kv_pool_gib * GIB // per_block) if per_block else 0
        tokens = blocks * page
    warnings += ([inst.problem] if inst.problem else []) + _overhead_warnings(profile, over, modelled, overheads)

    seq_cap, seq_src = (
        (max_num_seqs, "user") if max_num_seqs else scheduler_cap(profile, gpu_total_gib, gpu_name, tokens, ctx)
    )
    if explicit and slots:
        seq_cap, seq_src = slots, "user"
    limits = _Limits(
        explicit=explicit,
        layout=layout,
        tokens=tokens,
        blocks=blocks,
        page=page,
        slack=(tok_cap or 0) if profile.memory.sliding_window_slack == "max_batched_tokens" else 0,
        state_pages=profile.memory.hybrid_state_pages_per_request,
        seq_cap=seq_cap,
        tok_cap=tok_cap,
    )
    kvc, conc, binding = limits.at(ctx)
    inst, problem = _refuse_below_one_request(profile, inst, limits.at(mml)[0] if ctx != mml else kvc, tokens, mml)
    warnings += [problem] if problem else []
    pool_range_of, range_missing = _range_of(profile, card, knobs, tokens)
    return CapacityResult(
        engine=profile.name,
        budget=profile.memory.budget,
        gpu_total_gib=gpu_total_gib,
        tp=tp,
        pp=pp,
        instance=inst,
        overheads=over,
        overhead_model=modelled,
        weights_source=(
            "user (--weights-gib)" if weights_gib is not None else card.weights.source or card.weights.origin
        ),
        layout=layout,
        page_tokens=page,
        num_blocks=blocks,
        tokens=tokens,
        max_model_len=mml,
        context=ctx,
        kv_concurrency=round(kvc, 4),
        limits={"kv": math.floor(kvc), "max_num_seqs": seq_cap, "max_batched_tokens": tok_cap},
        limit_sources={"max_num_seqs": seq_src, "max_batched_tokens": tok_src},
        max_concurrency=conc,
        range=pool_range_of,
        range_missing=range_missing,
        binding_limit=binding,
        table=limits.table(mml),
        engine_version=version,
        other_residents_gib=other_residents_gib,
        warnings=warnings,
    )
