"""Canary capacity: old and new model copies on one GPU (docs/plan.md, Canary).

Fixed costs (weights, activation peak, non-torch, CUDA graphs) are paid twice, so each copy gets less than half
of a single copy's pool; the canary percentage does not change memory, but it does change which copy saturates
first. Knobs are chosen per the engine's memory semantics so that both copies start (docs/plan.md#canary).
"""

from __future__ import annotations

import math
from typing import Any

from pydantic import BaseModel, Field

from switchover.engines import EngineProfile
from switchover.model.card import ModelCard
from switchover.plan.capacity import CapacityResult, Knobs, capacity, resident_gib, sglang_style_auto_fraction
from switchover.plan.instance import GIB, Instance
from switchover.plan.kv import KVLayout
from switchover.plan.overhead import EngineVersion


def fit_target_gib(profile: EngineProfile) -> float:
    """The margin an explicit-context engine leaves free when it fits the context to the GPU (llama.cpp
    `--fit-target`, profile default `fit_target_mib`); 0 for an engine that publishes none."""
    item = profile.defaults.get("fit_target_mib")
    return float(item.value) / 1024 if item is not None else 0.0


class CanaryCopy(BaseModel):
    """One copy on the shared GPU, sized by `plan capacity`'s own function with the memory the earlier copy left."""

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
    """Two copies on one GPU, and the traffic they sustain by canary percentage."""

    engine: str
    engine_version: EngineVersion | None = Field(default=None, description="the release planned for")
    gpu_total_gib: float
    context: int
    single_tokens: int = Field(description="one copy alone: `plan capacity`'s pool for the same inputs")
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


def _per_token(layout: KVLayout) -> float:
    return max(layout.bytes_per_token + layout.sliding_bytes_per_token, 1.0)


def _split_knobs(
    profile: EngineProfile, old: CapacityResult, new: CapacityResult
) -> tuple[Knobs, Knobs, list[list[str]]]:
    """Knobs that give both copies about the same pool, per budget kind, from each copy's single-instance plan
    (the memory free at start, weights and overheads the one capacity model priced)."""
    mem = profile.memory
    total, free = old.gpu_total_gib, old.instance.free_at_start_gib
    w_old = old.instance.weights_gib + old.overheads.total_gib
    w_new = new.instance.weights_gib + new.overheads.total_gib
    if mem.budget == "fraction_of_total":
        u = math.floor((old.instance.fraction_used or mem.fraction()) / 2 * 100) / 100
        k = Knobs(memory_fraction=u)
        return k, k, [_flag(profile, "gpu_memory_fraction", u)] * 2
    if mem.budget == "cap_with_wiggle":
        shared = total * (mem.wiggle_room or 1.0) * (old.instance.fraction_used or mem.fraction()) - w_old - w_new
    elif mem.budget == "fraction_of_free_after_load":
        shared = (free - w_old - w_new) * (old.instance.fraction_used or mem.fraction())
    elif mem.budget == "explicit_context":
        shared = free - fit_target_gib(profile) - w_old - w_new
    elif mem.budget == "fraction_of_free_at_start":
        auto = sglang_style_auto_fraction(profile, total, old.tp, old.pp) or mem.fraction()
        shared = free - 2 * free * (1 - auto) - w_old - w_new  # each copy keeps its activation reserve
    else:
        shared = free - w_old - w_new
    each = max(shared, 0.0) / 2
    caps = [int(each * GIB / _per_token(old.layout)), int(each * GIB / _per_token(new.layout))]
    if mem.budget == "explicit_context":  # a copy never asks for more context than it would alone
        caps = [min(c, r.instance.knobs.context_tokens or c) for c, r in zip(caps, (old, new), strict=True)]
        ks = [Knobs(context_tokens=c) for c in caps]
        return ks[0], ks[1], [_flag(profile, "max_context_length", c) for c in caps]
    frac = old.instance.fraction_used if mem.budget != "fraction_of_free_at_start" else None
    if mem.budget == "fraction_of_free_at_start":
        frac = min(0.95, (old.instance.weights_gib + each) / free)  # copy 1 stops at its half; the cap pins both
    ks = [Knobs(memory_fraction=frac, kv_tokens_cap=c) for c in caps]
    flags = [
        (_flag(profile, "gpu_memory_fraction", frac) if frac is not None else [])
        + _flag(profile, "kv_cache_explicit_size", c)
        for c in caps
    ]
    return ks[0], ks[1], flags


def _second_fraction(
    profile: EngineProfile, first: CapacityResult, new_single: CapacityResult, knobs: Knobs, free_left: float
) -> Knobs:
    """SGLang-style budgets take their fraction of what is free when the copy starts: the second copy's fraction is
    what its weights and capped pool need of the memory the first left free."""
    if profile.memory.budget != "fraction_of_free_at_start" or knobs.kv_tokens_cap is None:
        return knobs
    need = new_single.instance.weights_gib + knobs.kv_tokens_cap * _per_token(new_single.layout) / GIB
    f2 = min(0.95, need / free_left) if free_left > 0 else 0.95
    return knobs.model_copy(update={"memory_fraction": f2})


def _warnings(
    plan_copies: list[CanaryCopy],
    single: CapacityResult,
    old: ModelCard,
    new: ModelCard,
    given: tuple[float | None, float | None],
) -> list[str]:
    """Copies that do not start, weights that are estimates, overheads nothing models, each copy's share."""
    warnings = [c.instance.problem for c in plan_copies if c.instance.problem]
    if single.engine_version is not None and single.engine_version.note:
        warnings.append(single.engine_version.note)
    for role, card, weights in (("old", old, given[0]), ("new", new, given[1])):
        if weights is None and card.weights.warning and (role == "old" or new is not old):
            warnings.append(f"{role} weights: {card.weights.warning}")
    warnings += [w for w in single.warnings if "overhead is not modelled" in w]
    if all(c.instance.starts for c in plan_copies) and single.tokens:
        share = plan_copies[0].tokens / single.tokens
        warnings.append(f"each copy gets {share:.0%} of a single copy's pool (fixed costs are paid twice)")
    return warnings


def _table(percents: tuple[float, ...], single_conc: int, c_old: int, c_new: int) -> list[CanaryRow]:
    """Sustainable total concurrency by canary percentage: the busier copy saturates first."""
    table = []
    for pct in percents:
        if pct <= 0 or pct >= 100:
            table.append(
                CanaryRow(
                    canary_percent=pct,
                    copies=1,
                    old_concurrency=single_conc if pct <= 0 else None,
                    new_concurrency=single_conc if pct >= 100 else None,
                    sustainable_total=single_conc,
                )
            )
            continue
        r = pct / 100
        total = math.floor(min(c_old / (1 - r), c_new / r)) if c_old and c_new else 0
        table.append(
            CanaryRow(
                canary_percent=pct, copies=2, old_concurrency=c_old, new_concurrency=c_new, sustainable_total=total
            )
        )
    return table


def canary_plan(
    old: ModelCard,
    profile: EngineProfile,
    gpu_total_gib: float,
    *,
    new: ModelCard | None = None,
    tp: int = 1,
    kv_dtype: str = "auto",
    context: int = 8192,
    max_model_len: int | None = None,
    other_residents_gib: float = 0.0,
    overheads: dict[str, float] | None = None,
    weights_gib: float | None = None,
    new_weights_gib: float | None = None,
    gpu_name: str | None = None,
    engine_version: str | None = None,
    percents: tuple[float, ...] = (0, 1, 5, 20, 50, 100),
) -> CanaryPlan:
    """Two copies (old, new) on one GPU under `profile`'s semantics, each sized by `plan capacity`'s function with
    the memory the earlier copy left free, and capacity by canary percentage."""
    new = new or old
    same: dict[str, Any] = dict(
        gpu_name=gpu_name,
        tp=tp,
        kv_dtype=kv_dtype,
        max_model_len=max_model_len,
        context=context,
        overheads=overheads,
        engine_version=engine_version,
    )
    single = capacity(
        old, profile, gpu_total_gib, weights_gib=weights_gib, other_residents_gib=other_residents_gib, **same
    )
    new_single = (
        single
        if new is old and new_weights_gib == weights_gib
        else capacity(
            new, profile, gpu_total_gib, weights_gib=new_weights_gib, other_residents_gib=other_residents_gib, **same
        )
    )
    k_old, k_new, flags = _split_knobs(profile, single, new_single)
    first = capacity(
        old,
        profile,
        gpu_total_gib,
        weights_gib=weights_gib,
        knobs=k_old,
        other_residents_gib=other_residents_gib,
        **same,
    )
    held = other_residents_gib + resident_gib(first)
    k_new2 = _second_fraction(
        profile, first, new_single, k_new, new_single.instance.free_at_start_gib - resident_gib(first)
    )
    if k_new2 is not k_new:
        flags[1] = _flag(profile, "gpu_memory_fraction", k_new2.memory_fraction or 0.0) + _flag(
            profile, "kv_cache_explicit_size", k_new2.kv_tokens_cap or 0
        )
    second = capacity(
        new, profile, gpu_total_gib, weights_gib=new_weights_gib, knobs=k_new2, other_residents_gib=held, **same
    )
    copies = [
        CanaryCopy(
            role=role,
            model=card.name,
            flags=fl,
            instance=res.instance,
            tokens=res.tokens,
            concurrency=res.max_concurrency if res.instance.starts else 0,
        )
        for role, card, res, fl in (("old", old, first, flags[0]), ("new", new, second, flags[1]))
    ]
    single_conc = single.max_concurrency if single.instance.starts else 0
    return CanaryPlan(
        engine=profile.name,
        engine_version=single.engine_version,
        gpu_total_gib=gpu_total_gib,
        context=single.context,
        single_tokens=single.tokens,
        single_concurrency=single_conc,
        copies=copies,
        table=_table(percents, single_conc, copies[0].concurrency, copies[1].concurrency),
        warnings=_warnings(copies, single, old, new, (weights_gib, new_weights_gib)),
    )
