"""KV bytes per token and per-sequence state, per GPU, for a model under TP x PP (docs/plan.md#model-card).

Standard attention: 2 x L_loc x kvh_rank x head_dim x dt, with kvh_rank = kv/TP when TP <= kv and 1 (replicated)
when TP > kv. MLA: L_loc x (kv_lora_rank + qk_rope_head_dim) x dt, replicated on every TP rank. Linear-attention
and Mamba layers pay no per-token KV but a fixed state per sequence, sharded by TP.
"""

from __future__ import annotations

import math

from pydantic import BaseModel, Field

from switchover.errors import BadInput
from switchover.model.card import DTYPE_BYTES, LayerKind, ModelCard


def kv_dtype_bytes(kv_dtype: str) -> float:
    """Bytes per KV element. `auto` follows the activation dtype (bf16/fp16: 2 bytes, also for fp32 and
    quantized checkpoints, which engines serve in 16-bit)."""
    key = kv_dtype.lower().strip()
    if key in ("auto", "model"):
        return 2
    if key not in DTYPE_BYTES:
        raise BadInput(f"unknown KV cache dtype {kv_dtype!r}", hint=f"known: auto, {', '.join(sorted(DTYPE_BYTES))}")
    return DTYPE_BYTES[key]


class KVLayout(BaseModel):
    """Per-GPU KV cost of one model under one layout (worst pipeline stage)."""

    tp: int
    pp: int
    kv_dtype: str
    dtype_bytes: float
    kv_heads_per_rank: int
    kv_heads_replicated: bool = Field(description="TP > KV heads: each rank holds a full copy of its head")
    layers_on_stage: int
    full_layers: int = Field(description="full-attention or MLA layers on the worst stage (scale with context)")
    sliding_layers: int
    sliding_window: int | None
    state_layers: int
    bytes_per_token_layer: float = Field(description="one attention layer, one token, this GPU")
    bytes_per_token: float = Field(description="all full-attention/MLA layers on the stage, one token")
    sliding_bytes_per_token: float
    state_bytes_per_sequence: float = Field(description="fixed conv + SSM state of all linear/mamba layers")
    notes: list[str] = Field(default_factory=list)

    def unified_page_tokens(self, alignment: int = 16) -> int | None:
        """vLLM's attention block for hybrids: the smallest multiple of `alignment` tokens whose attention page
        (one layer) holds one layer's recurrent state; None when the model has no state layers."""
        if not self.state_layers or not self.bytes_per_token_layer:
            return None
        state_page = self.state_bytes_per_sequence / self.state_layers
        return alignment * math.ceil(state_page / (alignment * self.bytes_per_token_layer))

    def request_bytes(self, context: int, page_tokens: int = 1, window_slack: int = 0, state_pages: int = 1) -> float:
        """Bytes one request holds at `context` tokens, pages rounded up (docs/plan.md#capacity). Sliding layers keep
        the window plus `window_slack` tokens (vLLM: W - 1 + max_num_batched_tokens, docs/plan.md#capacity)."""
        pages = math.ceil(context / page_tokens)
        full = pages * page_tokens * self.bytes_per_token
        sliding = 0.0
        if self.sliding_layers:
            window = min(context, (self.sliding_window or context) + max(window_slack - 1, 0))
            sliding = (math.ceil(window / page_tokens) + (1 if window < context else 0)) * page_tokens
            sliding *= self.sliding_bytes_per_token
        return full + sliding + self.state_bytes_per_sequence * state_pages


def _stages(layers: list[LayerKind], pp: int) -> list[list[LayerKind]]:
    """Contiguous stages of ceil(L/PP) layers; the first stages carry the remainder (worst case)."""
    per = math.ceil(len(layers) / pp)
    return [layers[i * per : (i + 1) * per] for i in range(pp)]


def _mla_layer_bytes(card: ModelCard, kv_dtype: str, mla_bytes: dict[str, float] | None) -> float | None:
    """The engine's own per-token, per-layer size of an MLA latent in `kv_dtype` (profile data, e.g. vLLM
    fp8_ds_mla or SGLang fp8: 656 B with scales), or None when the engine stores the plain latent."""
    key = kv_dtype.lower().strip()
    per_layer = (mla_bytes or {}).get(key)
    if per_layer is None or LayerKind.MLA in card.layers:
        return per_layer
    if key not in DTYPE_BYTES:  # a layout name of the engine's own (vLLM fp8_ds_mla): MLA only
        raise BadInput(
            f"KV cache dtype {kv_dtype!r} is a layout for MLA models; {card.name} has no MLA layers",
            hint="use auto or fp8",
        )
    return None  # a plain dtype (SGLang fp8): the MLA size does not apply to other attention


def kv_layout(
    card: ModelCard,
    tp: int = 1,
    pp: int = 1,
    kv_dtype: str = "auto",
    *,
    mla_bytes: dict[str, float] | None = None,
    draft_layers: int = 0,
) -> KVLayout:
    """Per-GPU KV bytes for the worst pipeline stage of `card` under TP x PP. `mla_bytes` is the engine profile's
    per-layer size of an MLA latent by KV dtype when the engine keeps scales with it (`memory.mla_kv_bytes_per_layer`:
    vLLM fp8_ds_mla, SGLang fp8); `draft_layers` adds MTP/EAGLE layers that share the pool (speculative decoding),
    sized like the target's full layers."""
    if tp < 1 or pp < 1:
        raise BadInput(f"TP and PP must be >= 1, got TP={tp} PP={pp}")
    if pp > card.num_layers:
        raise BadInput(f"PP={pp} exceeds the {card.num_layers} layers of {card.name}")
    att = card.attention
    engine_mla = _mla_layer_bytes(card, kv_dtype, mla_bytes)
    dt = 1.0 if engine_mla is not None and kv_dtype.lower() not in DTYPE_BYTES else kv_dtype_bytes(kv_dtype)
    notes: list[str] = []
    mla = LayerKind.MLA in card.layers
    if mla:
        kvh_rank, replicated = 1, tp > 1
        if engine_mla is not None:
            per_layer = float(engine_mla)
        else:
            per_layer = ((att.kv_lora_rank or 0) + (att.qk_rope_head_dim or 0)) * dt
        per_layer += att.indexer_bytes_per_token
        if tp > 1:
            notes.append("MLA latent is replicated on every TP rank: TP does not shrink per-GPU KV; DP-attention does")
    else:
        kv = att.num_kv_heads
        replicated = tp > kv
        kvh_rank = 1 if replicated else kv // tp
        per_layer = (att.head_dim + att.v_head_dim) * kvh_rank * dt
        if replicated:
            notes.append(f"TP={tp} > {kv} KV heads: each rank holds 1 replicated KV head ({tp // kv}x copies)")
    global_layer = per_layer
    if not mla and (att.global_head_dim or att.global_kv_heads):  # Gemma-style global layers have their own shape
        g_kv = att.global_kv_heads or att.num_kv_heads
        g_rank = 1 if tp > g_kv else g_kv // tp
        global_layer = 2 * (att.global_head_dim or att.head_dim) * g_rank * dt
        notes.append(
            f"global layers: {g_kv} KV heads x head_dim {att.global_head_dim or att.head_dim} "
            "(their own shape, from global_head_dim / num_global_key_value_heads)"
        )
    if card.family == "hybrid" or card.family == "sliding":
        stages = _stages(card.layers, pp)

        def cost(stage: list[LayerKind]) -> float:
            return sum(1 for k in stage if k in (LayerKind.FULL, LayerKind.MLA, LayerKind.SLIDING))

        worst = max(stages, key=cost)
    else:
        worst = card.layers[: math.ceil(card.num_layers / pp)]
    full = sum(1 for k in worst if k in (LayerKind.FULL, LayerKind.MLA)) + max(draft_layers, 0)
    if draft_layers:
        notes.append(f"{draft_layers} draft (MTP/EAGLE) layer(s) share the KV pool")
    sliding = sum(1 for k in worst if k == LayerKind.SLIDING)
    state_layers = sum(1 for k in worst if k in (LayerKind.LINEAR, LayerKind.MAMBA))
    state_bytes = 0.0
    if state_layers and card.state is not None:
        s = card.state
        per_seq = s.conv_elements * 2 + s.ssm_elements * s.ssm_dtype_bytes
        state_bytes = state_layers * per_seq / tp
        notes.append(f"{state_layers} {s.kind} layers hold {per_seq / 2**20:.2f} MiB each per sequence (/TP)")
    if pp > 1 and card.num_layers % pp:
        notes.append(f"{card.num_layers} layers over PP={pp} is uneven: the worst stage has {len(worst)} layers")
    return KVLayout(
        tp=tp,
        pp=pp,
        kv_dtype=kv_dtype,
        dtype_bytes=dt,
        kv_heads_per_rank=kvh_rank,
        kv_heads_replicated=replicated,
        layers_on_stage=len(worst),
        full_layers=full,
        sliding_layers=sliding,
        sliding_window=att.sliding_window,
        state_layers=state_layers,
        bytes_per_token_layer=per_layer,
        bytes_per_token=full * global_layer,
        sliding_bytes_per_token=sliding * per_layer,
        state_bytes_per_sequence=state_bytes,
        notes=notes,
    )
