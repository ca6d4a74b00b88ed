"""The target engine's memory knob that gives the same KV pool as the source engine's (translate --model --gpu).

The same number means different things (engines.md §1e): vLLM 0.9 is a share of total memory, SGLang's
mem_fraction_static a share of free memory covering weights + KV, TensorRT-LLM's a share of what is free after
loading. So the value is never copied: both pools are computed and the target knob is solved for.
"""

from __future__ import annotations

from pydantic import BaseModel

from switchover.engines import EngineProfile
from switchover.model.card import ModelCard
from switchover.plan.capacity import (
    GIB,
    Knobs,
    batched_tokens_cap,
    resolve_overheads,
    start_instance,
    weights_per_gpu_gib,
)
from switchover.plan.kv import kv_layout


class KnobEquivalent(BaseModel):
    """A target knob that reproduces the source pool, with the arithmetic behind it."""

    intent: str
    value: float | int
    pool_gib: float
    source_pool_gib: float
    explanation: str


def equivalent_memory_knob(card: ModelCard, src: EngineProfile, dst: EngineProfile, gpu_total_gib: float,
                           src_fraction: float, *, tp: int = 1, pp: int = 1, kv_dtype: str = "auto",
                           overheads: dict[str, float] | None = None) -> KnobEquivalent | None:
    """Solve the target's knob for the pool `src_fraction` gives in the source engine; None if it cannot match."""
    layout = kv_layout(card, tp, pp, kv_dtype, mla_bytes=src.memory.mla_kv_bytes_per_layer)  # source's layout
    weights = weights_per_gpu_gib(card, tp, pp)
    src_over = resolve_overheads(src, overheads, batched_tokens_cap(src, gpu_total_gib, None)[0])
    src_inst = start_instance(src, gpu_total_gib, gpu_total_gib, weights, src_over, layout,
                              Knobs(memory_fraction=src_fraction), tp, pp)
    target = src_inst.kv_pool_gib
    if not src_inst.starts or target <= 0:
        return None
    flag = src.flags["gpu_memory_fraction"].flag
    if dst.memory.budget == "explicit_context":
        ctx = int(target * GIB // max(layout.bytes_per_token, 1))
        return KnobEquivalent(intent="max_context_length", value=ctx, pool_gib=target, source_pool_gib=target,
                              explanation=f"{flag} {src_fraction:g} gives a {target:.2f} GiB KV pool "
                                          f"({src_inst.formula}); -c {ctx} holds as many tokens")
    over = resolve_overheads(dst, overheads, batched_tokens_cap(dst, gpu_total_gib, None)[0])

    def pool(fraction: float) -> float:
        inst = start_instance(dst, gpu_total_gib, gpu_total_gib, weights, over, layout,
                              Knobs(memory_fraction=fraction), tp, pp)
        return inst.kv_pool_gib if inst.starts else -1.0

    lo, hi = 0.01, 1.0
    if pool(hi) < target:
        return None
    for _ in range(50):  # the pool grows monotonically with every engine's fraction
        mid = (lo + hi) / 2
        if pool(mid) < target:
            lo = mid
        else:
            hi = mid
    value = round(hi, 3)
    dst_flag = dst.flags["gpu_memory_fraction"].flag or dst.flags["gpu_memory_fraction"].yaml_key
    return KnobEquivalent(intent="gpu_memory_fraction", value=value, pool_gib=pool(value), source_pool_gib=target,
                          explanation=f"{flag} {src_fraction:g} gives a {target:.2f} GiB KV pool on this GPU; "
                                      f"{dst_flag} {value:g} gives the same in {dst.name} ({dst.memory.budget})")
