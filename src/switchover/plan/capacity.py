"""KV pool, tokens and concurrency under each engine's memory semantics (reference/capacity.md §2-3).

The formula is chosen by the profile's `memory.budget` kind, never by engine name. Instances on one GPU are
simulated in start order, so the same code answers "one copy" and "two copies" (canary) questions: each
instance sees only the memory the earlier ones left free.
"""

from __future__ import annotations

import math
import re
from typing import Any

from pydantic import BaseModel, Field

from switchover.engines import EngineProfile
from switchover.errors import BadInput
from switchover.model.card import ModelCard
from switchover.plan.kv import KVLayout, kv_layout
from switchover.plan.overhead import ModelledOverheads, model_overheads
from switchover.plan.uncertainty import PoolRange, pool_range
from switchover.plan.weight_format import WeightFormat

GIB = 2**30


class Knobs(BaseModel):
    """One instance's memory knobs; None means the engine default."""

    memory_fraction: float | None = Field(default=None, description="the engine's own fraction knob")
    kv_tokens_cap: int | None = Field(default=None, description="explicit pool size in tokens (max-total-tokens…)")
    context_tokens: int | None = Field(default=None, description="llama.cpp -c (total over slots)")
    kv_pool_gib: float | None = Field(default=None, description="explicit pool size (vLLM --kv-cache-memory-bytes, "
                                      "VLLM_CPU_KVCACHE_SPACE): skips the fraction maths")


class Overheads(BaseModel):
    """Memory outside the KV pool, per GPU, in GiB, with where each default came from."""

    activation_peak_gib: float
    non_torch_gib: float
    cuda_graph_gib: float
    sources: dict[str, str] = Field(default_factory=dict)

    @property
    def total_gib(self) -> float:
        return self.activation_peak_gib + self.non_torch_gib + self.cuda_graph_gib


def resolve_overheads(profile: EngineProfile, overrides: dict[str, float] | None = None,
                      batched_tokens: int | None = None, modelled: ModelledOverheads | None = None) -> Overheads:
    """User overrides by name (activation_peak, non_torch, cuda_graph), else the profile's overhead model for the
    engine version (`modelled`), else the profile's flat defaults from real logs (a default measured at some
    max-batched-tokens is scaled linearly to `batched_tokens`)."""
    overrides = dict(overrides or {})
    known = {"activation_peak", "non_torch", "cuda_graph"}
    bad = sorted(set(overrides) - known)
    if bad:
        raise BadInput(f"unknown overhead {bad[0]!r}", hint=f"known: {', '.join(sorted(known))}")
    values: dict[str, float] = {}
    sources: dict[str, str] = {}
    for name in sorted(known):
        if name in overrides:
            values[name], sources[name] = overrides[name], "user override"
        elif modelled is not None:
            values[name] = {"activation_peak": modelled.activation_gib, "non_torch": modelled.non_torch_gib,
                            "cuda_graph": modelled.cuda_graph_gib}[name]
            sources[name] = modelled.sources[name]
        elif name in profile.memory.overheads:
            item = profile.memory.overheads[name]
            values[name], sources[name] = item.gib, item.source
            if item.at_batched_tokens and batched_tokens and batched_tokens != item.at_batched_tokens:
                values[name] = round(item.gib * batched_tokens / item.at_batched_tokens, 3)
                sources[name] = f"{item.source}; scaled to {batched_tokens} batched tokens"
        else:
            values[name], sources[name] = 0.0, "not modelled for this engine"
    return Overheads(activation_peak_gib=values["activation_peak"], non_torch_gib=values["non_torch"],
                     cuda_graph_gib=values["cuda_graph"], sources=sources)


class Instance(BaseModel):
    """What one engine instance gets on one GPU."""

    knobs: Knobs
    fraction_used: float | None
    free_at_start_gib: float
    weights_gib: float
    overheads_gib: float
    kv_pool_gib: float
    footprint_gib: float = Field(description="memory the instance holds once started")
    starts: bool
    formula: str
    problem: str | None = None


def _tier(table: dict[str, Any], total_gib: float, gpu_name: str | None) -> Any:
    """Pick a value from a tier table keyed like '>=70GiB (not A100/GB10)', '<20GB', 'other'."""
    name = (gpu_name or "").upper()
    for key, value in table.items():
        m = re.match(r"\s*(>=|<)\s*(\d+)\s*GI?B(?:\s*\(not ([^)]*)\))?", key, re.I)
        if not m:
            continue
        op, bound, excluded = m.group(1), float(m.group(2)), m.group(3)
        if excluded and any(x.strip() in name for x in excluded.upper().split("/")):
            continue
        if (op == ">=" and total_gib >= bound) or (op == "<" and total_gib < bound):
            return value
    return table.get("other")


def sglang_style_auto_fraction(profile: EngineProfile, total_gib: float, tp: int, pp: int) -> float | None:
    """Default fraction for engines that publish a reserve formula (SGLang memory_hook), else None."""
    reserve = profile.defaults.get("mem_fraction_reserve")
    if reserve is None:
        return None
    r = reserve.value  # every coefficient is profile data (sglang memory_hook.py, cited there)
    floor = r["chunked_prefill_floor"]
    chunk_table = profile.defaults.get("chunked_prefill_by_memory")
    chunk = _tier(chunk_table.value, total_gib * GIB / 1e9, None) if chunk_table else floor
    graph_bs = profile.defaults["cuda_graph_max_bs"].value if "cuda_graph_max_bs" in profile.defaults else 0
    reserved_mib = (r["base_mib"] + r["per_chunked_prefill_token_mib"] * max(chunk or floor, floor)
                    + r["per_cuda_graph_bs_mib"] * graph_bs + r["per_rank_mib"] * tp * pp)
    if "above_gb" in r and total_gib * GIB / 1e9 > r["above_gb"]:
        reserved_mib = max(reserved_mib, r["min_reserve_gib_above_60gb"] * 1024)
    return (total_gib * 1024 - reserved_mib) / (total_gib * 1024)


def start_instance(profile: EngineProfile, free_gib: float, total_gib: float, weights_gib: float,
                   over: Overheads, layout: KVLayout, knobs: Knobs, tp: int = 1, pp: int = 1) -> Instance:
    """One instance starting with `free_gib` free on a `total_gib` GPU, under the profile's budget semantics."""
    mem = profile.memory
    budget = mem.budget
    frac = knobs.memory_fraction if knobs.memory_fraction is not None else mem.default_fraction
    fixed = over.total_gib
    problem = None
    if budget == "fraction_of_total":
        requested = frac * total_gib  # type: ignore[operator]
        kv = requested - weights_gib - fixed
        footprint = requested
        formula = f"KV = {frac:g} x {total_gib:.2f} - weights {weights_gib:.2f} - overheads {fixed:.2f}"
        if requested > free_gib + 1e-9:
            problem = (f"asks for {frac:g} x {total_gib:.2f} = {requested:.2f} GiB but only {free_gib:.2f} GiB is "
                       "free: the engine refuses to start (free memory less than desired utilization)")
    elif budget == "fraction_of_free_at_start":
        if frac is None:  # the profile has the reserve formula when it has no default (checked on load)
            frac = sglang_style_auto_fraction(profile, total_gib, tp, pp) or mem.fraction()
        kv = free_gib - weights_gib - over.non_torch_gib - free_gib * (1 - frac)
        # the rest of the free memory is left to activations and graphs; it is not held at start
        footprint = frac * free_gib + over.activation_peak_gib + over.cuda_graph_gib
        formula = (f"KV = free {free_gib:.2f} - weights {weights_gib:.2f} - non-torch {over.non_torch_gib:.2f}"
                   f" - free x (1 - {frac:.3f})")
    elif budget == "fraction_of_free_after_load":
        kv = (free_gib - weights_gib - fixed) * frac  # type: ignore[operator]
        footprint = weights_gib + fixed + kv
        formula = f"KV = (free {free_gib:.2f} - weights {weights_gib:.2f} - peak {fixed:.2f}) x {frac:g}"
    elif budget == "cap_with_wiggle":
        wiggle = mem.wiggle_room or 1.0
        after_warmup = free_gib - weights_gib - fixed
        kv = after_warmup - (1 - wiggle * frac) * total_gib  # type: ignore[operator]
        footprint = weights_gib + fixed + max(kv, 0.0)
        formula = (f"KV = free after warm-up {after_warmup:.2f} - (1 - {wiggle:g} x {frac:g}) x total "
                   f"{total_gib:.2f}")
    else:  # explicit_context: the pool is what -c asks for
        ctx = knobs.context_tokens or 0
        kv = ctx * layout.bytes_per_token / GIB
        footprint = weights_gib + fixed + kv
        formula = f"KV = ctx {ctx} x {layout.bytes_per_token:.0f} B/token"
        if footprint > free_gib:
            problem = f"needs {footprint:.2f} GiB (weights + KV + buffers) but {free_gib:.2f} GiB is free"
    if knobs.kv_pool_gib is not None and budget != "explicit_context":
        kv, problem = knobs.kv_pool_gib, None
        footprint = weights_gib + fixed + kv
        formula = f"KV = explicit {kv:.2f} GiB (fraction ignored)"
    if knobs.kv_tokens_cap is not None and budget != "explicit_context":
        capped = knobs.kv_tokens_cap * (layout.bytes_per_token + layout.sliding_bytes_per_token) / GIB
        if capped < kv:
            footprint -= kv - capped
            kv = capped
            formula += f"; capped at {knobs.kv_tokens_cap} tokens"
    if kv <= 0 and problem is None:
        problem = f"no memory left for KV ({kv:.2f} GiB): weights {weights_gib:.2f} + overheads {fixed:.2f} GiB"
    return Instance(knobs=knobs, fraction_used=frac, free_at_start_gib=free_gib, weights_gib=weights_gib,
                    overheads_gib=fixed, kv_pool_gib=max(kv, 0.0), footprint_gib=footprint,
                    starts=problem is None, formula=formula, problem=problem)


def weights_per_gpu_gib(card: ModelCard, tp: int, pp: int, ep: int = 1) -> float:
    """Weights per GPU: sharded parts / TP, replicated parts (norms, routers, MLA down-projections, K/V past the
    KV heads) whole, then / PP (capacity.md §3); prefer a logged figure."""
    return card.weights.per_rank_bytes(tp) / pp / GIB


def _tier_value(profile: EngineProfile, key: str, total_gib: float, gpu_name: str | None) -> int | None:
    """A tiered default (e.g. max_num_batched_tokens_by_memory), or None when the profile has none."""
    table = profile.defaults.get(key)
    value = _tier(table.value, total_gib, gpu_name) if table else None
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


def scheduler_cap(profile: EngineProfile, total_gib: float, gpu_name: str | None, tokens: int,
                  context: int) -> tuple[int | None, str]:
    """The engine's default running-sequence cap, from profile data, with where it came from."""
    flag = profile.flags.get("max_concurrent_sequences")
    if flag is not None and isinstance(flag.default, int) and flag.default > 0:
        return flag.default, flag.source
    d = profile.defaults
    if "max_num_seqs_by_memory" in d:
        return int(_tier(d["max_num_seqs_by_memory"].value, total_gib, gpu_name)), d["max_num_seqs_by_memory"].source
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
        return int(_tier(table.value, total_gib, gpu_name)), table.source
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
    range: PoolRange | None = Field(default=None, description="tokens range from the planner's own residuals on "
                                    "logged start-ups (None: see range_missing)")
    range_missing: str | None = Field(default=None, description="why there is no range: not measured for this "
                                      "engine and model kind, or the pool was set explicitly")
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
    weight_format: WeightFormat | None = Field(default=None, description="the format matrix's verdict for "
                                               "these weights on this engine and GPU (set by the CLI)")
    warnings: list[str] = Field(default_factory=list)


def _kv_concurrency(layout: KVLayout, blocks: int, page: int, context: int, slack: int = 0,
                    state_pages: int = 1) -> float:
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


def _input_warnings(card: ModelCard, profile: EngineProfile, layout: KVLayout, *, gpu_total_gib: float,
                    gpu_name: str | None, engine_version: str | None, modelled: ModelledOverheads | None,
                    weights_gib: float | None, draft_layers: int) -> list[str]:
    """What the inputs leave unknown or assumed: config notes, the overhead model, weights, the GPU tier."""
    warnings = [*card.notes, *layout.notes]
    if engine_version is not None and modelled is None:
        warnings.append(f"engine version {engine_version[:40]}: the {profile.name} profile has no overhead model "
                        "for it, so its flat overhead defaults apply")
    if card.weights.warning and weights_gib is None:
        warnings.append(card.weights.warning)
    if draft_layers and card.attention.draft_layers and weights_gib is None:
        warnings.append(f"the {card.attention.draft_layers} MTP layer(s) in the checkpoint are loaded for speculative "
                        "decoding but not counted in the weights: pass --weights-gib from the log")
    if gpu_name is None and _tier_excludes(profile, gpu_total_gib):
        warnings.append("engine defaults by GPU tier (max_num_seqs, batched tokens) assume the GPU is not one the "
                        "engine treats apart (e.g. vLLM's A100/GB10 rule): name it with --gpu")
    return warnings


def _overhead_warnings(profile: EngineProfile, over: Overheads, modelled: ModelledOverheads | None,
                       overrides: dict[str, float] | None) -> list[str]:
    """Overheads counted as 0 because nothing models them, and an unverified CUDA-graph default."""
    if profile.memory.budget == "explicit_context":
        return []
    out = [f"{name} overhead is not modelled for {profile.name}: pass --overhead {name}=GIB"
           for name, src in over.sources.items() if src.startswith("not modelled")]
    cuda_graph = profile.memory.overheads.get("cuda_graph")
    if (cuda_graph is not None and not cuda_graph.verified and "cuda_graph" not in (overrides or {})
            and modelled is None):
        out.append(f"CUDA-graph estimate not subtracted ({cuda_graph.note}); --overhead cuda_graph=GIB")
    return out


def _page_tokens(profile: EngineProfile, layout: KVLayout, page_tokens: int | None) -> tuple[int, str | None]:
    """Tokens per KV block: the user's, else the profile's, grown for hybrids under page-size unification."""
    page = page_tokens or profile.memory.page_tokens
    unified = layout.unified_page_tokens(page) if profile.memory.hybrid_page_unification else None
    if page_tokens is None and unified and unified > page:
        return unified, (f"hybrid model: the attention block grows to {unified} tokens so one page holds a layer's "
                         f"recurrent state ({profile.display_name} page-size unification)")
    return page, None


def _refuse_below_one_request(profile: EngineProfile, inst: Instance, one: float, tokens: int,
                              mml: int) -> tuple[Instance, str | None]:
    """A started pool that cannot hold one max_model_len request: a warning, and a refusal where the engine
    refuses (vllm 0.32.0 kv_cache_utils.check_enough_kv_cache_memory)."""
    if one >= 1 or not inst.starts:
        return inst, None
    problem = (f"the pool ({tokens} tokens) cannot hold one request of max_model_len {mml}: lower "
               "--max-model-len or raise the memory knob")
    if profile.memory.refuses_below_one_request:
        inst = inst.model_copy(update={"starts": False,
                                       "problem": f"{problem} ({profile.display_name} refuses to start)"})
    return inst, problem


def _range_of(profile: EngineProfile, card: ModelCard, knobs: Knobs, tokens: int) -> tuple[PoolRange | None,
                                                                                            str | None]:
    """The tokens range from the planner's own evaluation residuals, or why there is none."""
    if profile.memory.budget == "explicit_context" or knobs.kv_pool_gib is not None:
        return None, "the pool size is set explicitly, not predicted"
    dense = card.family == "dense" and card.moe is None
    found = pool_range(profile.name, dense, tokens)
    if found is not None:
        return found, None
    return None, (f"not measured: no evaluated start-up logs for {profile.name} with "
                  f"{'dense' if dense else 'MoE, MLA, sliding or hybrid'} models (bench/plan_accuracy.py), so the "
                  "error of this prediction is unknown")


def _modelled(profile: EngineProfile, card: ModelCard, *, gpu_total_gib: float, gpu_name: str | None, tp: int,
              mml: int, max_num_seqs: int | None, tok_cap: int | None, engine_version: str | None,
              eager: bool) -> ModelledOverheads | None:
    """The profile's overhead model at the engine's own defaults for this GPU (max_num_seqs, batched tokens)."""
    profile_seqs = max_num_seqs or (scheduler_cap(profile, gpu_total_gib, gpu_name, 0, 0)[0] if
                                    "max_running_requests_auto" not in profile.defaults else None)
    step_tokens = tok_cap or _tier_value(profile, "max_num_batched_tokens_by_memory", gpu_total_gib, gpu_name)
    return model_overheads(profile, card, version=engine_version, tp=tp, seqs=profile_seqs,
                           batched_tokens=step_tokens, max_model_len=mml, eager=eager)


def capacity(card: ModelCard, profile: EngineProfile, gpu_total_gib: float, *, gpu_name: str | None = None,
             tp: int = 1, pp: int = 1, kv_dtype: str = "auto", knobs: Knobs | None = None,
             max_model_len: int | None = None, context: int | None = None, max_num_seqs: int | None = None,
             max_batched_tokens: int | None = None, page_tokens: int | None = None,
             weights_gib: float | None = None, overheads: dict[str, float] | None = None,
             free_gib: float | None = None, slots: int | None = None, engine_version: str | None = None,
             eager: bool = False, draft_layers: int = 0) -> CapacityResult:
    """KV pool, blocks, tokens, concurrency at `context` and the binding limit, for one instance.
    `draft_layers`: MTP/EAGLE layers that run for speculative decoding and keep KV in the same pool."""
    knobs = knobs or Knobs()
    layout = kv_layout(card, tp, pp, kv_dtype, mla_bytes=profile.memory.mla_kv_bytes_per_layer,
                       draft_layers=draft_layers)
    tok_cap, tok_src = (max_batched_tokens, "user") if max_batched_tokens else batched_tokens_cap(
        profile, gpu_total_gib, gpu_name)
    mml = max_model_len or card.max_position_embeddings
    if not mml:
        raise BadInput(f"{card.name}: config has no max_position_embeddings; pass --max-model-len")
    ctx = context or mml
    if ctx > mml:
        raise BadInput(f"context {ctx} exceeds max_model_len {mml}")
    modelled = _modelled(profile, card, gpu_total_gib=gpu_total_gib, gpu_name=gpu_name, tp=tp, mml=mml,
                         max_num_seqs=max_num_seqs, tok_cap=tok_cap, engine_version=engine_version, eager=eager)
    over = resolve_overheads(profile, overheads, tok_cap, modelled)
    if knobs.memory_fraction is None and modelled is not None and modelled.default_fraction is not None:
        knobs = knobs.model_copy(update={"memory_fraction": modelled.default_fraction})
    if free_gib is None and modelled is not None and modelled.baseline_held_gib is not None:
        free_gib = gpu_total_gib - modelled.baseline_held_gib  # the version's own baseline (context, dist init)
    elif free_gib is None and profile.memory.cuda_context_gib is not None:
        free_gib = gpu_total_gib - profile.memory.cuda_context_gib
    warnings = _input_warnings(card, profile, layout, gpu_total_gib=gpu_total_gib, gpu_name=gpu_name,
                               engine_version=engine_version, modelled=modelled, weights_gib=weights_gib,
                               draft_layers=draft_layers)
    explicit = profile.memory.budget == "explicit_context"
    if explicit and knobs.context_tokens is None:
        knobs = knobs.model_copy(update={"context_tokens": mml * (slots or 1)})
    w = weights_gib if weights_gib is not None else weights_per_gpu_gib(card, tp, pp)
    inst = start_instance(profile, gpu_total_gib if free_gib is None else free_gib, gpu_total_gib, w, over,
                          layout, knobs, tp, pp)
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

    seq_cap, seq_src = (max_num_seqs, "user") if max_num_seqs else scheduler_cap(
        profile, gpu_total_gib, gpu_name, tokens, ctx)
    if explicit and slots:
        seq_cap, seq_src = slots, "user"
    limits = _Limits(explicit=explicit, layout=layout, tokens=tokens, blocks=blocks, page=page,
                     slack=(tok_cap or 0) if profile.memory.sliding_window_slack == "max_batched_tokens" else 0,
                     state_pages=profile.memory.hybrid_state_pages_per_request, seq_cap=seq_cap, tok_cap=tok_cap)
    kvc, conc, binding = limits.at(ctx)
    inst, problem = _refuse_below_one_request(profile, inst, limits.at(mml)[0] if ctx != mml else kvc, tokens, mml)
    warnings += [problem] if problem else []
    pool_range_of, range_missing = _range_of(profile, card, knobs, tokens)
    return CapacityResult(
        engine=profile.name, budget=profile.memory.budget, gpu_total_gib=gpu_total_gib, tp=tp, pp=pp,
        instance=inst, overheads=over, overhead_model=modelled, weights_source=(
            "user (--weights-gib)" if weights_gib is not None else card.weights.source or card.weights.origin),
        layout=layout, page_tokens=page, num_blocks=blocks, tokens=tokens, max_model_len=mml,
        context=ctx, kv_concurrency=round(kvc, 4), limits={"kv": math.floor(kvc), "max_num_seqs": seq_cap,
                                                            "max_batched_tokens": tok_cap},
        limit_sources={"max_num_seqs": seq_src, "max_batched_tokens": tok_src}, max_concurrency=conc,
        range=pool_range_of, range_missing=range_missing,
        binding_limit=binding, table=limits.table(mml), warnings=warnings)
