"""Capability checks: settings a GPU cannot honour, which engines silently replace (issue 5 §7, seed 004 §1)."""

from __future__ import annotations

from pydantic import BaseModel

CAPABILITY_SOURCE = ("seed 004 §1 (fp8 KV on A100 falls back without a warning); bf16 needs sm80 (CUDA bf16 "
                     "tensor cores, Ampere+); fp8 tensor cores need sm89 (Ada/Hopper)")


class CapabilityWarning(BaseModel):
    """A setting this GPU will not run as asked."""

    setting: str
    needs: str
    have: str
    consequence: str
    source: str = CAPABILITY_SOURCE


def _sm(cc: str | None) -> int | None:
    if not cc:
        return None
    major, _, minor = cc.partition(".")
    return int(major) * 10 + int(minor or 0)


def check_capabilities(compute_capability: str | None, *, dtype: str = "auto", model_dtype: str = "bfloat16",
                       kv_dtype: str = "auto", quantization: str | None = None) -> list[CapabilityWarning]:
    """Warnings for bf16 below sm80, fp8 KV cache below sm89, fp8 weights below sm89. Without a compute
    capability nothing can be checked: one warning says which settings went unchecked (never an empty list that
    reads as "all fine")."""
    sm = _sm(compute_capability)
    if sm is None:
        asked = [s for s, wanted in (
            (f"dtype {dtype} (model {model_dtype})", dtype.lower() in ("bfloat16", "bf16") or (
                dtype == "auto" and model_dtype.lower() in ("bfloat16", "bf16"))),
            (f"kv_cache_dtype {kv_dtype}", kv_dtype.lower().startswith("fp8")),
            (f"quantization {quantization}", (quantization or "").lower().startswith("fp8"))) if wanted]
        if not asked:
            return []
        return [CapabilityWarning(setting=", ".join(asked), needs="sm80 (bf16) / sm89 (fp8)", have="unknown",
                                  consequence="not checked: the GPU's compute capability is unknown (name a catalog "
                                              "GPU with --gpu, see `switchover hw gpus`)")]
    have = f"sm{sm}"
    out: list[CapabilityWarning] = []
    wants_bf16 = dtype.lower() in ("bfloat16", "bf16") or (dtype == "auto" and model_dtype.lower() in (
        "bfloat16", "bf16"))
    if wants_bf16 and sm < 80:
        out.append(CapabilityWarning(setting=f"dtype {dtype} (model {model_dtype})", needs="sm80", have=have,
                                     consequence="served in float16 instead: different numerics, overflow risk on "
                                                 "bf16-trained weights"))
    if kv_dtype.lower().startswith("fp8") and sm < 89:
        out.append(CapabilityWarning(
            setting=f"kv_cache_dtype {kv_dtype}", needs="sm89", have=have,
            consequence="the pool is still 1 byte per element (the tokens planned here), but FlashAttention "
                        "cannot read fp8 KV on this GPU: the engine picks a backend that dequantizes it (Triton, "
                        "FlashInfer), slower than 16-bit KV; fp8_e5m2 is refused by FlashAttention everywhere",
            source="vllm 0.32.0: vllm/v1/attention/backends/fa_utils.py flash_attn_supports_kv_cache_dtype and "
                   "the backend fallback in platforms/cuda.py; RTX 3090 logs with a 1-byte KV pool (issue 12 §7)"))
    if (quantization or "").lower().startswith("fp8") and sm < 89:
        out.append(CapabilityWarning(setting=f"quantization {quantization}", needs="sm89", have=have,
                                     consequence="weight-only fp8 (dequantised to 16-bit for compute) or refusal "
                                                 "below sm80: no fp8 speed-up"))
    return out
