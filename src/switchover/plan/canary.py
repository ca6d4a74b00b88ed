"""Canary capacity: old and new model copies on one GPU (seed 001 §2's table, corrected).

Fixed costs (weights, activation peak, non-torch, CUDA graphs) are paid twice, so each copy gets less than half
of a single copy's pool; the canary percentage does not change memory, but it does change which copy saturates
first. Knobs are chosen per the engine's memory semantics so that both copies start (capacity.md §3).
"""

from __future__ import annotations

import math

from pydantic import BaseModel, Field

from switchover.engines import EngineProfile
from switchover.model.card import ModelCard
from switchover.plan.capacity import (
    GIB,
    Instance,
    Knobs,
    resolve_overheads,
    sglang_style_auto_fraction,
    start_instance,
    weights_per_gpu_gib,
)
from switchover.plan.kv import KVLayout, kv_layout


def fit_target_gib(profile: EngineProfile) -> float:
    """The margin an explicit-context engine leaves free when it fits the context to the GPU (llama.cpp
    `--fit-target`, profile default `fit_target_mib`); 0 for an engine that publishes none."""
    item = profile.defaults.get("fit_target_mib")
    return float(item.value) / 1024 if item is not None else 0.0


class CanaryCopy(BaseModel):
    """One copy on the shared GPU."""

    role: str
    model: str
    flags: list[str]
    instance: Instance
    tokens: int
    concurrency: int = Field(description="requests of `context` tokens its pool holds")


class CanaryRow(BaseModel):
    """Capacity at one canary percentage."""

    canary_percent: float
    copies: int
    old_concurrency: int | None
    new_concurrency: int | None
    sustainable_total: int = Field(description="total concurrency before the busier copy saturates")


class CanaryPlan(BaseModel):
    engine: str
    gpu_total_gib: float
    context: int
    single_tokens: int
    single_concurrency: int
    copies: list[CanaryCopy]
    table: list[CanaryRow]
    warnings: list[str] = Field(default_factory=list)


def _flag(profile: EngineProfile, intent: str, value: float | int) -> list[str]:
    spec = profile.flags.get(intent)
    if spec is None:
        return []
    if intent == "gpu_memory_fraction" and spec.default == value:
        return []
    if spec.flag and spec.kind != "none" and " " not in spec.flag:
        return [spec.flag, f"{value:.3f}".rstrip("0").rstrip(".") if isinstance(value, float) else str(value)]
    if spec.yaml_key:
        return [f"{spec.yaml_key}: {value}  # YAML ({profile.launch.config_file})"]
    return []


def _tokens(inst: Instance, layout: KVLayout, page: int) -> int:
    per_block = page * (layout.bytes_per_token + layout.sliding_bytes_per_token)
    return int(inst.kv_pool_gib * GIB // per_block) * page if per_block else 0


def _concurrency(tokens: int, layout: KVLayout, page: int, context: int) -> int:
    if tokens <= 0:
        return 0
    per_token = layout.bytes_per_token + layout.sliding_bytes_per_token
    return math.floor(tokens * per_token / layout.request_bytes(context, page)) if per_token else 0


def _split_knobs(profile: EngineProfile, total: float, free: float, fixed: tuple[float, float],
                 layouts: tuple[KVLayout, KVLayout]) -> tuple[Knobs, Knobs, list[list[str]]]:
    """Knobs that give both copies about the same pool, per budget kind."""
    mem = profile.memory
    (w_old, w_new), (l_old, l_new) = fixed, layouts
    if mem.budget == "fraction_of_total":
        u = math.floor(mem.fraction() / 2 * 100) / 100
        k = Knobs(memory_fraction=u)
        return k, k, [_flag(profile, "gpu_memory_fraction", u)] * 2
    shared = (total * (mem.wiggle_room or 1.0) * mem.fraction()
              if mem.budget == "cap_with_wiggle" else free)
    if mem.budget == "fraction_of_free_after_load":
        shared = (free - w_old - w_new) * mem.fraction()
    elif mem.budget == "explicit_context":
        shared = free - fit_target_gib(profile) - w_old - w_new
    elif mem.budget == "fraction_of_free_at_start":
        auto = sglang_style_auto_fraction(profile, total, 1, 1) or mem.fraction()
        shared = free - 2 * free * (1 - auto) - w_old - w_new  # each copy keeps its activation reserve
    else:
        shared = shared - w_old - w_new
    each = max(shared, 0.0) / 2
    caps = [int(each * GIB / max(l_old.bytes_per_token + l_old.sliding_bytes_per_token, 1)),
            int(each * GIB / max(l_new.bytes_per_token + l_new.sliding_bytes_per_token, 1))]
    if mem.budget == "explicit_context":
        ks = [Knobs(context_tokens=c) for c in caps]
        return ks[0], ks[1], [_flag(profile, "max_context_length", c) for c in caps]
    frac = mem.default_fraction if mem.budget != "fraction_of_free_at_start" else None
    if mem.budget == "fraction_of_free_at_start":
        frac = min(0.95, (w_old + each) / free)  # copy 1 stops at its half; the token cap pins both pools
    ks = [Knobs(memory_fraction=frac, kv_tokens_cap=c) for c in caps]
    flags = [(_flag(profile, "gpu_memory_fraction", frac) if frac is not None else [])
             + _flag(profile, "kv_cache_explicit_size", c) for c in caps]
    return ks[0], ks[1], flags


def canary_plan(old: ModelCard, profile: EngineProfile, gpu_total_gib: float, *, new: ModelCard | None = None,
                tp: int = 1, kv_dtype: str = "auto", context: int = 8192, other_residents_gib: float = 0.0,
                overheads: dict[str, float] | None = None, weights_gib: float | None = None,
                new_weights_gib: float | None = None,
                percents: tuple[float, ...] = (0, 1, 5, 20, 50, 100)) -> CanaryPlan:
    """Two copies (old, new) on one GPU under `profile`'s semantics, and capacity by canary percentage."""
    new = new or old
    over = resolve_overheads(profile, overheads)
    mla = profile.memory.mla_kv_bytes_per_layer
    lo, ln = kv_layout(old, tp, 1, kv_dtype, mla_bytes=mla), kv_layout(new, tp, 1, kv_dtype, mla_bytes=mla)
    wo = weights_gib if weights_gib is not None else weights_per_gpu_gib(old, tp, 1)
    wn = new_weights_gib if new_weights_gib is not None else weights_per_gpu_gib(new, tp, 1)
    page = profile.memory.page_tokens
    free = gpu_total_gib - other_residents_gib
    explicit = profile.memory.budget == "explicit_context"
    per_token = lo.bytes_per_token + lo.sliding_bytes_per_token
    fit_ctx = int(max(free - fit_target_gib(profile) - wo - over.total_gib, 0) * GIB / per_token) if per_token else 0
    single_knobs = Knobs(context_tokens=fit_ctx) if explicit else Knobs()
    single = start_instance(profile, free, gpu_total_gib, wo, over, lo, single_knobs, tp)
    single_tokens = fit_ctx if explicit else _tokens(single, lo, page)
    single_conc = _concurrency(single_tokens, lo, page, context)
    k_old, k_new, flags = _split_knobs(profile, gpu_total_gib, free, (wo + over.total_gib, wn + over.total_gib),
                                       (lo, ln))
    first = start_instance(profile, free, gpu_total_gib, wo, over, lo, k_old, tp)
    cap = k_new.kv_tokens_cap
    if profile.memory.budget == "fraction_of_free_at_start" and cap is not None:
        left = free - first.footprint_gib  # the second copy's fraction applies to what the first left free
        need = wn + cap * (ln.bytes_per_token + ln.sliding_bytes_per_token) / GIB
        f2 = min(0.95, need / left) if left > 0 else 0.95
        k_new = k_new.model_copy(update={"memory_fraction": f2})
        flags[1] = _flag(profile, "gpu_memory_fraction", f2) + _flag(profile, "kv_cache_explicit_size",
                                                                      cap)
    second = start_instance(profile, free - first.footprint_gib, gpu_total_gib, wn, over, ln, k_new, tp)
    copies = []
    for role, card, inst, layout, fl in (("old", old, first, lo, flags[0]), ("new", new, second, ln, flags[1])):
        tokens = _tokens(inst, layout, page) if profile.memory.budget != "explicit_context" else (
            inst.knobs.context_tokens or 0)
        copies.append(CanaryCopy(role=role, model=card.name, flags=fl, instance=inst, tokens=tokens,
                                 concurrency=_concurrency(tokens, layout, page, context) if inst.starts else 0))
    warnings = [c.instance.problem for c in copies if c.instance.problem]
    for role, card, given in (("old", old, weights_gib), ("new", new, new_weights_gib)):
        if given is None and card.weights.warning and (role == "old" or new is not old):
            warnings.append(f"{role} weights: {card.weights.warning}")
    warnings += [f"{name} overhead is not modelled for {profile.name} (counted as 0): pass --overhead {name}=GIB"
                 for name, src in sorted(over.sources.items()) if src.startswith("not modelled") and not explicit]
    if all(c.instance.starts for c in copies) and single_tokens:
        share = copies[0].tokens / single_tokens
        warnings.append(f"each copy gets {share:.0%} of a single copy's pool (fixed costs are paid twice)")
    table = []
    c_old, c_new = copies[0].concurrency, copies[1].concurrency
    for pct in percents:
        if pct <= 0 or pct >= 100:
            total = single_conc
            table.append(CanaryRow(canary_percent=pct, copies=1, old_concurrency=total if pct <= 0 else None,
                                   new_concurrency=total if pct >= 100 else None, sustainable_total=total))
            continue
        r = pct / 100
        total = math.floor(min(c_old / (1 - r), c_new / r)) if c_old and c_new else 0
        table.append(CanaryRow(canary_percent=pct, copies=2, old_concurrency=c_old, new_concurrency=c_new,
                               sustainable_total=total))
    return CanaryPlan(engine=profile.name, gpu_total_gib=gpu_total_gib, context=context, single_tokens=single_tokens,
                      single_concurrency=single_conc, copies=copies, table=table, warnings=warnings)
