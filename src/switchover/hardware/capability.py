"""Capability checks: settings a GPU cannot honour, which engines silently replace (issue 5 §7)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from pydantic import BaseModel

from switchover.engines.compat import sm_of

if TYPE_CHECKING:
    from switchover.engines.profile import EngineProfile

CAPABILITY_SOURCE = (
    "NVIDIA CUDA C++ Programming Guide, compute capabilities "
    "(https://docs.nvidia.com/cuda/cuda-c-programming-guide/): bf16 tensor-core math from compute "
    "capability 8.0 (Ampere); fp8 tensor-core math from 8.9 (Ada, Hopper)"
)


class CapabilityWarning(BaseModel):
    """A setting this GPU will not run as asked."""

    setting: str
    needs: str
    have: str
    consequence: str
    source: str = CAPABILITY_SOURCE


def _sm(cc: str | None) -> int | None:
    return sm_of(cc)  # the one parser ('9.0' -> 90; not ASCII digits -> None, never a ValueError)


def _fp8_kv_unknown_engine(sm: int, setting: str) -> CapabilityWarning | None:
    """No engine given: it is said, with what each profile that read it records (the others: not read)."""
    from switchover.engines import load_profile
    from switchover.engines.names import ENGINES

    profiles = [load_profile(name) for name in ENGINES]
    known = [(p, p.memory.fp8_kv_below) for p in profiles if p.memory.fp8_kv_below is not None]
    if sm >= 89 and all(sm >= f.min_sm for _, f in known):
        return None
    said = "; ".join(f"{p.display_name} below sm{f.min_sm}: {f.consequence}" for p, f in known if sm < f.min_sm)
    unread = ", ".join(p.display_name for p in profiles if p.memory.fp8_kv_below is None)
    return CapabilityWarning(
        setting=setting,
        needs="sm89 (fp8)",
        have=f"sm{sm}",
        consequence=(
            "the engine is not given, so what it does with fp8 KV on this GPU is not known (give the "
            "engine for its profile's facts)"
            + (f". {said}" if said else "")
            + (f". Not read from the source of: {unread}" if unread else "")
        ),
        source="; ".join([f"{p.name}: {f.source}" for p, f in known if sm < f.min_sm] or [CAPABILITY_SOURCE]),
    )


def _fp8_kv_warning(sm: int, kv_dtype: str, engine: EngineProfile | None) -> CapabilityWarning | None:
    """The engine's own fp8-KV facts below native support (profile `memory.fp8_kv_below`); an engine whose profile
    has none, or no engine at all, gets a warning that says it is not known."""
    setting = f"kv_cache_dtype {kv_dtype}"
    if engine is None:
        return _fp8_kv_unknown_engine(sm, setting)
    facts = engine.memory.fp8_kv_below
    if facts is None:
        if sm >= 89:
            return None
        return CapabilityWarning(
            setting=setting,
            needs="sm89 (fp8)",
            have=f"sm{sm}",
            consequence=f"what {engine.display_name} does with fp8 KV on this GPU is not in its profile (not read "
            "from its source): the pool is planned at 1 byte per element; check its start-up log for "
            "the KV dtype and the token count",
            source=f"{engine.name} profile: no memory.fp8_kv_below",
        )
    if sm >= facts.min_sm:
        return None
    return CapabilityWarning(
        setting=setting,
        needs=f"sm{facts.min_sm}",
        have=f"sm{sm}",
        consequence=facts.consequence,
        source=f"{engine.name}: {facts.source}",
    )


def check_capabilities(
    compute_capability: str | None,
    *,
    dtype: str = "auto",
    model_dtype: str = "bfloat16",
    kv_dtype: str = "auto",
    quantization: str | None = None,
    engine: EngineProfile | None = None,
) -> list[CapabilityWarning]:
    """Warnings for bf16 below sm80, fp8 KV cache below the engine's native fp8 support (its profile), fp8
    weights below sm89. Without a compute capability nothing can be checked: one warning says which settings went
    unchecked (never an empty list that reads as "all fine")."""
    sm = _sm(compute_capability)
    if sm is None:
        asked = [
            s
            for s, wanted in (
                (
                    f"dtype {dtype} (model {model_dtype})",
                    dtype.lower() in ("bfloat16", "bf16")
                    or (dtype == "auto" and model_dtype.lower() in ("bfloat16", "bf16")),
                ),
                (f"kv_cache_dtype {kv_dtype}", kv_dtype.lower().startswith("fp8")),
                (f"quantization {quantization}", (quantization or "").lower().startswith("fp8")),
            )
            if wanted
        ]
        if not asked:
            return []
        return [
            CapabilityWarning(
                setting=", ".join(asked),
                needs="sm80 (bf16) / sm89 (fp8)",
                have="unknown",
                consequence="not checked: the GPU's compute capability is unknown (name a catalog "
                "GPU with --gpu, see `switchover hw gpus`)",
            )
        ]
    have = f"sm{sm}"
    out: list[CapabilityWarning] = []
    wants_bf16 = dtype.lower() in ("bfloat16", "bf16") or (
        dtype == "auto" and model_dtype.lower() in ("bfloat16", "bf16")
    )
    if wants_bf16 and sm < 80:
        out.append(
            CapabilityWarning(
                setting=f"dtype {dtype} (model {model_dtype})",
                needs="sm80",
                have=have,
                consequence="served in float16 instead: different numerics, overflow risk on bf16-trained weights",
            )
        )
    if kv_dtype.lower().startswith("fp8") and (warning := _fp8_kv_warning(sm, kv_dtype, engine)) is not None:
        out.append(warning)
    if (quantization or "").lower().startswith("fp8") and sm < 89:
        out.append(
            CapabilityWarning(
                setting=f"quantization {quantization}",
                needs="sm89",
                have=have,
                consequence="weight-only fp8 (dequantised to 16-bit for compute) or refusal "
                "below sm80: no fp8 speed-up",
            )
        )
    return out
