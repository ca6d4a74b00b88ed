"""Speculative decoding between engines: one vocabulary (a method — ngram, draft_model, eagle, eagle3, mtp — a draft
model, the tokens drafted per step) over each engine's spelling of it, and the rules that tie its settings together
in one engine and not in another. Each rule is read from an engine's source at a release (cited where applied)."""

from __future__ import annotations

from switchover.plan.translate_values import Derived, Render

# vLLM before 0.8.3 selected prompt lookup as the draft model "[ngram]"
# (https://github.com/vllm-project/vllm/blob/v0.6.3/vllm/config.py#L1227); 0.34 still reads it
# (https://github.com/vllm-project/vllm/blob/v0.34.0/vllm/config/speculative.py#L1368)
_NGRAM_MODEL = ("[ngram]", "ngram")
# TensorRT-LLM MTPDecodingConfig: "N modules produce N draft tokens"
_MTP_SOURCE = "https://github.com/NVIDIA/TensorRT-LLM/blob/v1.3.0rc3/tensorrt_llm/llmapi/llm_args.py"
# SGLang: with topk 1, num_draft_tokens is num_steps + 1; steps given alone leave topk unset and the start fails
_CHAIN_SOURCE = "https://github.com/sgl-project/sglang/blob/v0.5.5/python/sglang/srt/server_args.py#L1576-L1604"


def _settable(r: Render, intent: str) -> bool:
    spec = r.dst.flags.get(intent)
    return spec is not None and bool(spec.flag or spec.yaml_key or spec.env)


def speculation(r: Render) -> None:
    """The method, draft model and drafted tokens in the target's terms."""
    v = r.values
    if str(v.get("speculative_model")) in _NGRAM_MODEL and "speculative_method" not in v:
        v.pop("speculative_model")
        v["speculative_method"] = "ngram"
        r.follows["speculative_model"] = "speculative_method"
    _mtp(r)
    if "speculative_model" in v and "speculative_method" not in v and _settable(r, "speculative_method"):
        spec = r.dst.flags["speculative_method"]
        r.details["speculative_model"] = (
            f"{r.dst.name} also needs {spec.flag or spec.yaml_key} for the method "
            f"(EAGLE, EAGLE3, a standalone draft ...): {r.src.name} detects it from the "
            "draft checkpoint, so it is not guessed here"
        )
    _chain(r)


def _mtp(r: Render) -> None:
    """MTP modules (TensorRT-LLM's num_nextn_predict_layers) are the tokens drafted per step elsewhere, and back."""
    v = r.values
    if "speculative_mtp_layers" in v and not _settable(r, "speculative_mtp_layers"):
        layers = v.pop("speculative_mtp_layers")
        v.setdefault("speculative_tokens", layers)
        r.details["speculative_tokens"] = f"{layers} MTP modules draft {layers} tokens ({_MTP_SOURCE})"
        r.follows["speculative_mtp_layers"] = "speculative_tokens"
    elif (
        v.get("speculative_method") == "mtp"
        and "speculative_tokens" in v
        and "speculative_mtp_layers" not in v
        and _settable(r, "speculative_mtp_layers")
    ):
        v["speculative_mtp_layers"] = v.pop("speculative_tokens")
        r.details["speculative_mtp_layers"] = f"MTP drafts one token per module ({_MTP_SOURCE})"
        r.follows["speculative_tokens"] = "speculative_mtp_layers"


def _chain(r: Render) -> None:
    """Tokens drafted one per step (a chain: vLLM, TensorRT-LLM's linear tree) where the target also takes a width
    per step and a count of tokens verified (SGLang): width 1, count steps + 1; and back, a chain needs neither."""
    v = r.values
    tokens = v.get("speculative_tokens")
    if v.get("speculative_method") == "ngram" and _settable(r, "speculative_topk"):
        if tokens is not None:
            r.lose(
                "speculative_tokens",
                "different_meaning",
                f"{tokens} tokens per lookup: {r.dst.name} sizes "
                "n-gram drafts by its own window settings, not by a token count",
            )
        return
    if isinstance(tokens, int) and _settable(r, "speculative_topk") and "speculative_topk" not in v:
        v["speculative_topk"] = 1
        r.derived.append(
            Derived(
                what="speculative_topk",
                value=1,
                why=f"{r.src.name} drafts a chain: one token per step",
                source=_CHAIN_SOURCE,
            )
        )
        if _settable(r, "speculative_draft_tokens") and "speculative_draft_tokens" not in v:
            v["speculative_draft_tokens"] = tokens + 1
            r.derived.append(
                Derived(
                    what="speculative_draft_tokens",
                    value=tokens + 1,
                    source=_CHAIN_SOURCE,
                    why=f"a chain of {tokens} steps verifies {tokens + 1} tokens",
                )
            )
        return
    if not _settable(r, "speculative_topk") and v.get("speculative_topk") == 1:
        r.default("speculative_topk", f"one token per step: {r.dst.name} drafts a chain", _CHAIN_SOURCE)
    draft = v.get("speculative_draft_tokens")
    if isinstance(tokens, int) and draft == tokens + 1 and not _settable(r, "speculative_draft_tokens"):
        r.default(
            "speculative_draft_tokens",
            f"{draft} = {tokens} steps + 1: what a chain of {tokens} verifies",
            _CHAIN_SOURCE,
        )
