"""One engine instance's memory on one GPU under the engine's budget semantics (docs/plan.md#capacity).

The formula is chosen by the profile's `memory.budget` kind, never by engine name: the memory knobs, the overheads
outside the KV pool (a user's override, the version's overhead model, else the profile's flat defaults), and what
an instance holds once it starts with some memory free. `plan.capacity` turns the pool into tokens and concurrency.
"""

from __future__ import annotations

import re
from typing import Any

from pydantic import BaseModel, Field

from switchover.engines import EngineProfile
from switchover.errors import BadInput
from switchover.plan.kv import KVLayout
from switchover.plan.overhead import ModelledOverheads

GIB = 2**30


class Knobs(BaseModel):
    """One instance's memory knobs; None means the engine default."""

    memory_fraction: float | None = Field(default=None, description="the engine's own fraction knob")
    kv_tokens_cap: int | None = Field(default=None, description="explicit pool size in tokens (max-total-tokens…)")
    context_tokens: int | None = Field(default=None, description="llama.cpp -c (total over slots)")
    kv_pool_gib: float | None = Field(
        default=None,
        description="explicit pool size (vLLM --kv-cache-memory-bytes, "
        "VLLM_CPU_KVCACHE_SPACE): skips the fraction maths",
    )


class Overheads(BaseModel):
    """Memory outside the KV pool, per GPU, in GiB, with where each default came from."""

    activation_peak_gib: float
    non_torch_gib: float
    cuda_graph_gib: float
    sources: dict[str, str] = Field(default_factory=dict)

    @property
    def total_gib(self) -> float:
        return self.activation_peak_gib + self.non_torch_gib + self.cuda_graph_gib


def resolve_overheads(
    profile: EngineProfile,
    overrides: dict[str, float] | None = None,
    batched_tokens: int | None = None,
    modelled: ModelledOverheads | None = None,
) -> Overheads:
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
            values[name] = {
                "activation_peak": modelled.activation_gib,
                "non_torch": modelled.non_torch_gib,
                "cuda_graph": modelled.cuda_graph_gib,
            }[name]
            sources[name] = modelled.sources[name]
        elif name in profile.memory.overheads:
            item = profile.memory.overheads[name]
            values[name], sources[name] = item.gib, item.source
            if item.at_batched_tokens and batched_tokens and batched_tokens != item.at_batched_tokens:
                values[name] = round(item.gib * batched_tokens / item.at_batched_tokens, 3)
                sources[name] = f"{item.source}; scaled to {batched_tokens} batched tokens"
        else:
            values[name], sources[name] = 0.0, "not modelled for this engine"
    return Overheads(
        activation_peak_gib=values["activation_peak"],
        non_torch_gib=values["non_torch"],
        cuda_graph_gib=values["cuda_graph"],
        sources=sources,
    )


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
    fits_memory: bool = Field(
        default=True,
        description="the knobs leave memory for a pool (False: `problem` is a "
        "memory refusal; True with starts False: refused for another reason)",
    )


def pick_tier(table: dict[str, Any], total_gib: float, gpu_name: str | None) -> Any:
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
    chunk = pick_tier(chunk_table.value, total_gib * GIB / 1e9, None) if chunk_table else floor
    graph_bs = profile.defaults["cuda_graph_max_bs"].value if "cuda_graph_max_bs" in profile.defaults else 0
    reserved_mib = (
        r["base_mib"]
        + r["per_chunked_prefill_token_mib"] * max(chunk or floor, floor)
        + r["per_cuda_graph_bs_mib"] * graph_bs
        + r["per_rank_mib"] * tp * pp
    )
    if "above_gb" in r and total_gib * GIB / 1e9 > r["above_gb"]:
        reserved_mib = max(reserved_mib, r["min_reserve_gib_above_60gb"] * 1024)
    return (total_gib * 1024 - reserved_mib) / (total_gib * 1024)


def start_instance(
    profile: EngineProfile,
    free_gib: float,
    total_gib: float,
    weights_gib: float,
    over: Overheads,
    layout: KVLayout,
    knobs: Knobs,
    tp: int = 1,
    pp: int = 1,
) -> Instance:
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
            problem = (
                f"asks for {frac:g} x {total_gib:.2f} = {requested:.2f} GiB but only {free_gib:.2f} GiB is "
                "free: the engine refuses to start (free memory less than desired utilization)"
            )
    elif budget == "fraction_of_free_at_start":
        if frac is None:  # the profile has the reserve formula when it has no default (checked on load)
            frac = sglang_style_auto_fraction(profile, total_gib, tp, pp) or mem.fraction()
        kv = free_gib - weights_gib - over.non_torch_gib - free_gib * (1 - frac)
        # the rest of the free memory is left to activations and graphs; it is not held at start
        footprint = frac * free_gib + over.activation_peak_gib + over.cuda_graph_gib
        formula = (
            f"KV = free {free_gib:.2f} - weights {weights_gib:.2f} - non-torch {over.non_torch_gib:.2f}"
            f" - free x (1 - {frac:.3f})"
        )
    elif budget == "fraction_of_free_after_load":
        kv = (free_gib - weights_gib - fixed) * frac  # type: ignore[operator]
        footprint = weights_gib + fixed + kv
        formula = f"KV = (free {free_gib:.2f} - weights {weights_gib:.2f} - peak {fixed:.2f}) x {frac:g}"
    elif budget == "cap_with_wiggle":
        wiggle = mem.wiggle_room or 1.0
        after_warmup = free_gib - weights_gib - fixed
        kv = after_warmup - (1 - wiggle * frac) * total_gib  # type: ignore[operator]
        footprint = weights_gib + fixed + max(kv, 0.0)
        formula = f"KV = free after warm-up {after_warmup:.2f} - (1 - {wiggle:g} x {frac:g}) x total {total_gib:.2f}"
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
    return Instance(
        knobs=knobs,
        fraction_used=frac,
        free_at_start_gib=free_gib,
        weights_gib=weights_gib,
        overheads_gib=fixed,
        kv_pool_gib=max(kv, 0.0),
        footprint_gib=footprint,
        starts=problem is None,
        formula=formula,
        problem=problem,
        fits_memory=problem is None,
    )
