"""KV bytes per token per GPU (reference/capacity.md §1), as table tests."""

from __future__ import annotations

from typing import Any

import pytest

from switchover.errors import BadInput
from switchover.model import card_from_config
from switchover.plan.kv import kv_layout
from tests.plan import configs as C


@pytest.mark.parametrize(
    ("cfg", "tp", "kv_dtype", "bytes_per_token", "replicated"),
    [
        (C.LLAMA_8B, 1, "auto", 2 * 32 * 8 * 128 * 2, False),  # 131072 B = 128 KiB
        (C.LLAMA_8B, 2, "auto", 2 * 32 * 4 * 128 * 2, False),
        (C.LLAMA_8B, 8, "auto", 2 * 32 * 1 * 128 * 2, False),
        (C.LLAMA_8B, 16, "auto", 2 * 32 * 1 * 128 * 2, True),  # TP > 8 KV heads: replicated, not halved
        (C.LLAMA_8B, 1, "fp8", 2 * 32 * 8 * 128 * 1, False),
        (C.QWQ_32B, 4, "auto", 65536, False),  # capacity.md §2 SGLang check: 65,536 B
        (C.QWEN3_235B, 8, "auto", 2 * 94 * 1 * 128 * 2, True),  # 4 KV heads on TP8: 1 per rank
        (C.QWEN3_06B, 1, "auto", 2 * 28 * 8 * 128 * 2, False),  # head_dim 128 from config
        (C.DEEPSEEK_V3, 1, "auto", 61 * 576 * 2, False),  # MLA: 576 elements per layer, no K/V factor 2
        (C.DEEPSEEK_V3, 8, "auto", 61 * 576 * 2, True),  # latent replicated on every TP rank
        (C.DEEPSEEK_V3, 8, "fp8_ds_mla", 61 * 656, True),  # vLLM fp8_ds_mla: 656 B/token/layer
        (C.DEEPSEEK_V32, 1, "fp8_ds_mla", 48068, False),  # sglang PR#11309: 61 x (656 + 132)
        (C.QWEN3_NEXT, 1, "auto", 12 * 2 * 2 * 256 * 2, False),  # only 12 attention layers pay per token
    ],
)
def test_bytes_per_token(cfg: dict[str, Any], tp: int, kv_dtype: str, bytes_per_token: int, replicated: bool) -> None:
    from switchover.engines import load_profile

    layout = kv_layout(
        card_from_config(cfg), tp=tp, kv_dtype=kv_dtype, mla_bytes=load_profile("vllm").memory.mla_kv_bytes_per_layer
    )
    assert layout.bytes_per_token + layout.sliding_bytes_per_token == pytest.approx(bytes_per_token)
    assert layout.kv_heads_replicated is replicated


def test_replication_is_explained() -> None:
    layout = kv_layout(card_from_config(C.QWEN3_235B), tp=8)
    assert layout.kv_heads_per_rank == 1
    assert any("replicated" in n for n in layout.notes)


def test_qwen35_gdn_state_is_about_3_2_mb_per_layer_and_150_mb_per_sequence() -> None:
    layout = kv_layout(card_from_config(C.QWEN35_27B_SHAPE))
    per_layer = layout.state_bytes_per_sequence / layout.state_layers
    assert per_layer == pytest.approx(3.2e6, rel=0.01)  # capacity.md §1: ~3.2 MB per GDN layer
    assert layout.state_bytes_per_sequence == pytest.approx(150e6, rel=0.03)  # ~150 MB per sequence


def test_state_is_sharded_by_tp_but_attention_kv_heads_divide() -> None:
    one, two = (kv_layout(card_from_config(C.QWEN3_NEXT), tp=t) for t in (1, 2))
    assert two.state_bytes_per_sequence == pytest.approx(one.state_bytes_per_sequence / 2)
    assert two.bytes_per_token == pytest.approx(one.bytes_per_token / 2)


def test_sliding_layers_cost_at_most_the_window() -> None:
    layout = kv_layout(card_from_config(C.GEMMA2_9B))
    assert layout.full_layers == 21 and layout.sliding_layers == 21
    short = layout.request_bytes(1000, page_tokens=16)
    long = layout.request_bytes(8000, page_tokens=16)
    per_layer = layout.bytes_per_token_layer
    # full layers grow with context; sliding layers stop at window (4096) + one page of slack
    assert long - short == pytest.approx(21 * per_layer * (8000 - 1008) + 21 * per_layer * (4096 + 16 - 1008), rel=1e-9)


def test_uneven_pipeline_takes_the_worst_stage() -> None:
    layout = kv_layout(card_from_config(C.LLAMA_8B), pp=3)
    assert layout.layers_on_stage == 11
    assert layout.bytes_per_token == 11 * 8 * 128 * 2 * 2
    assert any("uneven" in n for n in layout.notes)


def test_bad_layout_values_are_bad_input() -> None:
    card = card_from_config(C.LLAMA_8B)
    with pytest.raises(BadInput):
        kv_layout(card, tp=0)
    with pytest.raises(BadInput, match="exceeds"):
        kv_layout(card, pp=64)
    with pytest.raises(BadInput, match="KV cache dtype"):
        kv_layout(card, kv_dtype="int3")


def test_gemma_global_layers_use_their_own_heads_and_head_dim() -> None:
    """Gemma-4 style configs give global (full) layers their own KV heads and head dim (issue 12 §6)."""
    cfg = {
        **C.GEMMA3_TEXT["text_config"],
        "architectures": ["Gemma4ForCausalLM"],
        "global_head_dim": 512,
        "num_global_key_value_heads": 2,
    }
    layout = kv_layout(card_from_config(cfg))
    assert layout.full_layers == 8 and layout.sliding_layers == 40
    assert layout.bytes_per_token == 8 * 2 * 2 * 512 * 2  # global layers: 2 heads x 512
    assert layout.sliding_bytes_per_token == 40 * 2 * 8 * 256 * 2  # sliding layers keep the standard shape


def test_sglang_fp8_mla_keeps_scales_656_bytes_per_layer_vllm_fp8_576() -> None:
    from switchover.engines import load_profile

    card = card_from_config(C.DEEPSEEK_V3)
    sglang = kv_layout(card, kv_dtype="fp8", mla_bytes=load_profile("sglang").memory.mla_kv_bytes_per_layer)
    vllm = kv_layout(card, kv_dtype="fp8", mla_bytes=load_profile("vllm").memory.mla_kv_bytes_per_layer)
    assert sglang.bytes_per_token == 61 * 656
    assert vllm.bytes_per_token == 61 * 576


def test_engine_mla_layouts_come_from_the_profile_not_code() -> None:
    """vLLM's fp8_ds_mla (656 B) and nvfp4_ds_mla (352 B) are profile data; an engine without them refuses the
    name, and a model without MLA layers refuses the layout (vLLM only builds it for MLA)."""
    from switchover.engines import load_profile

    vllm = load_profile("vllm").memory.mla_kv_bytes_per_layer
    card = card_from_config(C.DEEPSEEK_V3)
    assert kv_layout(card, kv_dtype="nvfp4_ds_mla", mla_bytes=vllm).bytes_per_token == 61 * 352
    with pytest.raises(BadInput, match="fp8_ds_mla"):
        kv_layout(card, kv_dtype="fp8_ds_mla")  # no engine data: not a dtype the planner knows
    with pytest.raises(BadInput, match="MLA"):
        kv_layout(card_from_config(C.LLAMA_8B), kv_dtype="fp8_ds_mla", mla_bytes=vllm)
    sglang = load_profile("sglang").memory.mla_kv_bytes_per_layer  # plain fp8 names: MLA size for MLA only
    assert kv_layout(card_from_config(C.LLAMA_8B), kv_dtype="fp8_e4m3", mla_bytes=sglang).bytes_per_token == (
        2 * 32 * 8 * 128 * 1
    )


def test_draft_layers_add_full_layers_to_the_pool() -> None:
    card = card_from_config({**C.DEEPSEEK_V3, "num_nextn_predict_layers": 1})
    assert card.attention.draft_layers == 1
    plain, spec = kv_layout(card), kv_layout(card, draft_layers=1)
    assert spec.bytes_per_token == plain.bytes_per_token * 62 / 61
    assert any("draft" in n for n in spec.notes)


def test_hybrid_attention_block_grows_until_a_page_holds_one_state_layer() -> None:
    """vllm platforms/interface.py: block = 16 x cdiv(mamba_page, 16 x attention bytes per token per layer)."""
    layout = kv_layout(card_from_config(C.QWEN3_NEXT))
    state_page = layout.state_bytes_per_sequence / layout.state_layers
    page = layout.unified_page_tokens(16)
    assert page is not None and page % 16 == 0
    assert page * layout.bytes_per_token_layer >= state_page > (page - 16) * layout.bytes_per_token_layer
    assert kv_layout(card_from_config(C.LLAMA_8B)).unified_page_tokens(16) is None


def test_align_mode_holds_two_state_pages_per_request() -> None:
    layout = kv_layout(card_from_config(C.QWEN3_NEXT))
    one, two = layout.request_bytes(4096, 16), layout.request_bytes(4096, 16, state_pages=2)
    assert two - one == pytest.approx(layout.state_bytes_per_sequence)
