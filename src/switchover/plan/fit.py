"""Does it fit, and if not, what would make it fit: each suggestion is the same capacity model run again with one
input changed (more GPUs, an FP8 KV cache, a higher memory knob, a quantized checkpoint, a shorter context), so
the figures it promises are the figures `plan capacity` would print for that change."""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from pydantic import BaseModel, Field

from switchover.errors import BadInput
from switchover.plan.instance import Knobs

if TYPE_CHECKING:  # capacity.py holds a FitAdvice: these modules import this one
    from switchover.engines import EngineProfile
    from switchover.model.card import ModelCard
    from switchover.plan.capacity import CapacityResult

HIGH_FRACTION = 0.95  # the highest memory knob suggested: leaves room for fragmentation and other processes
_QUANTIZED = (("FP8", 1.0), ("4-bit (AWQ/GPTQ)", 0.5))  # bytes per parameter, group scales not counted


class FitOption(BaseModel):
    """One change that makes the model fit, with what the capacity model gives after it."""

    change: str = Field(description="the change in words")
    flags: str = Field(default="", description="how to say it to `plan capacity` (and the engine)")
    tokens: int = Field(description="KV pool tokens after the change")
    concurrency: int = Field(description="requests of the planned context that run at once after the change")
    note: str = ""


class FitAdvice(BaseModel):
    """The plain verdict of a capacity plan and, when it does not fit, the changes that would make it fit."""

    fits: bool
    verdict: str
    options: list[FitOption] = Field(default_factory=list)


Rerun = Callable[..., "CapacityResult"]  # capacity() with the CLI's inputs bound; keyword overrides change one input


def _fits(result: CapacityResult) -> bool:
    return result.instance.starts and result.max_concurrency >= 1


def verdict(result: CapacityResult) -> str:
    """One line: fits (how many requests of the planned context at once) or does not fit (why)."""
    if not result.instance.starts:
        return f"does not fit: {result.instance.problem}"
    if result.max_concurrency < 1:
        return f"does not fit: the KV pool ({result.tokens:,} tokens) holds no request of {result.context:,} tokens"
    return (
        f"fits: {result.max_concurrency} requests of {result.context:,} tokens at once "
        f"(binding: {result.binding_limit})"
    )


def _try(rerun: Rerun, **change: Any) -> CapacityResult | None:
    try:
        return rerun(**change)
    except BadInput:  # a change the engine or model cannot take (an impossible layout, an unknown dtype)
        return None


def advise(
    result: CapacityResult,
    card: ModelCard,
    profile: EngineProfile,
    rerun: Rerun,
    *,
    tp: int,
    pp: int,
    kv_dtype: str,
    memory_fraction: float | None,
    max_gpus: int = 8,
) -> FitAdvice:
    """The verdict, and when it does not fit every single change among the usual ones that makes it fit."""
    from switchover.plan.parallel import shape_problems

    if _fits(result):
        return FitAdvice(fits=True, verdict=verdict(result))
    options: list[FitOption] = []

    def keep(change: str, flags: str, after: CapacityResult | None, note: str = "") -> None:
        if after is not None and _fits(after):
            options.append(
                FitOption(change=change, flags=flags, tokens=after.tokens, concurrency=after.max_concurrency, note=note)
            )

    n = tp * 2
    while n * pp <= max_gpus:
        if not shape_problems(card, profile, n, pp):
            after = _try(rerun, tp=n)
            if after is not None and _fits(after):
                keep(f"tensor parallel {n} ({n * pp} GPUs)", f"--tp {n}", after)
                break
        n *= 2
    if kv_dtype in ("auto", "", None) and profile.flag("kv_cache_dtype") is not None:
        keep(
            "an FP8 KV cache (half the bytes per token; check quality on your task)",
            "--kv-dtype fp8",
            _try(rerun, kv_dtype="fp8"),
        )
    knob = profile.flag("gpu_memory_fraction")
    default = profile.memory.default_fraction
    current = memory_fraction if memory_fraction is not None else default
    if knob is not None and current is not None and current < HIGH_FRACTION:
        keep(
            f"a higher memory knob ({knob.flag} {HIGH_FRACTION}; default {default})",
            f"--memory-fraction {HIGH_FRACTION}",
            _try(rerun, knobs=Knobs(memory_fraction=HIGH_FRACTION)),
            note="leaves less room for other processes and fragmentation",
        )
    if card.weights.quantization is None and card.weights.params:
        for label, bytes_per_param in _QUANTIZED:
            gib = card.weights.params * bytes_per_param / 2**30 / (tp * pp)
            keep(
                f"a {label} checkpoint of the same model (~{gib:.1f} GiB of weights per GPU)",
                f"--weights-gib {gib:.1f}",
                _try(rerun, weights_gib=gib),
                note="an estimate at that many bytes per parameter; a real checkpoint's size is in its index",
            )
    if result.tokens > 0:
        shorter = result.tokens
        keep(
            f"a shorter context: at most {shorter:,} tokens per request",
            f"--max-model-len {shorter}",
            _try(rerun, max_model_len=shorter, context=shorter),
        )
    return FitAdvice(fits=False, verdict=verdict(result), options=options)
