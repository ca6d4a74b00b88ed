"""The target engine's memory knob that gives the same KV pool as the source engine's (translate --model --gpu).

The same number means different things (docs/plan.md#translate): vLLM 0.9 is a share of total memory, SGLang's
mem_fraction_static a share of free memory covering weights + KV, TensorRT-LLM's a share of what is free after
loading. So the value is never copied: both pools are computed by `plan capacity`'s own function (each engine at
its release, with its version's overhead model) and the target knob is solved for.
"""

from __future__ import annotations

from pydantic import BaseModel

from switchover.engines import EngineProfile
from switchover.errors import BadInput
from switchover.model.card import ModelCard
from switchover.plan.capacity import GIB, CapacityResult, Knobs, capacity


class KnobEquivalent(BaseModel):
    """A target knob that reproduces the source pool, with the arithmetic behind it."""

    intent: str
    value: float | int
    pool_gib: float
    source_pool_gib: float
    explanation: str


def equivalent_memory_knob(
    card: ModelCard,
    src: EngineProfile,
    dst: EngineProfile,
    gpu_total_gib: float,
    src_fraction: float,
    *,
    tp: int = 1,
    pp: int = 1,
    kv_dtype: str = "auto",
    overheads: dict[str, float] | None = None,
    gpu_name: str | None = None,
    max_model_len: int | None = None,
    src_version: str | None = None,
    dst_version: str | None = None,
) -> KnobEquivalent | None:
    """Solve the target's knob for the pool `src_fraction` gives in the source engine; None if it cannot match."""

    def plan(profile: EngineProfile, version: str | None, knobs: Knobs) -> CapacityResult | None:
        try:
            return capacity(
                card,
                profile,
                gpu_total_gib,
                knobs=knobs,
                engine_version=version,
                gpu_name=gpu_name,
                tp=tp,
                pp=pp,
                kv_dtype=kv_dtype,
                overheads=overheads,
                max_model_len=max_model_len,
            )
        except BadInput:  # no max_model_len known: nothing to size
            return None

    source = plan(src, src_version, Knobs(memory_fraction=src_fraction))
    if source is None or not source.instance.fits_memory or source.instance.kv_pool_gib <= 0:
        return None
    target = source.instance.kv_pool_gib
    flag = src.flags["gpu_memory_fraction"].flag
    if dst.memory.budget == "explicit_context":
        ctx = int(target * GIB // max(source.layout.bytes_per_token, 1))
        return KnobEquivalent(
            intent="max_context_length",
            value=ctx,
            pool_gib=target,
            source_pool_gib=target,
            explanation=f"{flag} {src_fraction:g} gives a {target:.2f} GiB KV pool "
            f"({source.instance.formula}); -c {ctx} holds as many tokens",
        )

    def pool(fraction: float) -> float:
        res = plan(dst, dst_version, Knobs(memory_fraction=fraction))
        return res.instance.kv_pool_gib if res is not None and res.instance.fits_memory else -1.0

    lo, hi = 0.01, 1.0
    if pool(hi) < target:
        return None
    for _ in range(30):  # the pool grows monotonically with every engine's fraction; 2^-30 is far below 0.001
        mid = (lo + hi) / 2
        if pool(mid) < target:
            lo = mid
        else:
            hi = mid
    value = round(hi, 3)
    dst_flag = dst.flags["gpu_memory_fraction"].flag or dst.flags["gpu_memory_fraction"].yaml_key
    return KnobEquivalent(
        intent="gpu_memory_fraction",
        value=value,
        pool_gib=pool(value),
        source_pool_gib=target,
        explanation=f"{flag} {src_fraction:g} gives a {target:.2f} GiB KV pool on this GPU; "
        f"{dst_flag} {value:g} gives the same in {dst.name} ({dst.memory.budget})",
    )
