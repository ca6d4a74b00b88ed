"""Capacity under each engine's memory semantics, including reference/capacity.md's worked examples (<= 1%)."""

from __future__ import annotations

import pytest

from switchover.engines import load_profile
from switchover.errors import BadInput
from switchover.model import card_from_config
from switchover.plan.capacity import GIB, Knobs, capacity, resolve_overheads, start_instance
from switchover.plan.kv import kv_layout
from tests.plan import configs as C

H100 = 79.18  # GiB as vLLM sees an H100 80GB (capacity.md §2)
LLAMA8B_LOGGED = dict(weights_gib=14.99, overheads={"activation_peak": 4.74, "non_torch": 0.13})


def test_vllm_llama8b_h100_single_copy_is_51_4_gib() -> None:
    """capacity.md §3: one copy at 0.9 has 51.4 GiB."""
    res = capacity(
        card_from_config(C.LLAMA_8B),
        load_profile("vllm"),
        H100,
        gpu_name="H100-80G",
        knobs=Knobs(memory_fraction=0.9),
        max_model_len=8192,
        **LLAMA8B_LOGGED,
    )
    assert res.instance.kv_pool_gib == pytest.approx(51.4, rel=0.01)
    assert res.tokens == pytest.approx(51.4 * GIB / 131072, rel=0.01)


def test_vllm_llama8b_h100_two_copies_at_045_get_15_7_gib_each() -> None:
    """capacity.md §3: two copies at 0.45 have about 15.7 GiB each: fixed costs are paid twice."""
    profile = load_profile("vllm")
    card = card_from_config(C.LLAMA_8B)
    layout = kv_layout(card)
    over = resolve_overheads(profile, LLAMA8B_LOGGED["overheads"])
    first = start_instance(profile, H100, H100, 14.99, over, layout, Knobs(memory_fraction=0.45))
    second = start_instance(profile, H100 - first.footprint_gib, H100, 14.99, over, layout, Knobs(memory_fraction=0.45))
    assert first.starts and second.starts
    assert first.kv_pool_gib == pytest.approx(15.7, rel=0.01)
    assert second.kv_pool_gib == pytest.approx(15.7, rel=0.01)
    assert first.kv_pool_gib < 51.4 / 2


def test_vllm_refuses_a_second_copy_that_asks_for_more_than_is_free() -> None:
    profile = load_profile("vllm")
    layout = kv_layout(card_from_config(C.LLAMA_8B))
    over = resolve_overheads(profile)
    second = start_instance(profile, H100 * 0.1, H100, 14.99, over, layout, Knobs(memory_fraction=0.9))
    assert not second.starts and "refuses to start" in (second.problem or "")


def test_vllm_concurrency_is_blocks_over_cdiv_context_block() -> None:
    """capacity.md §2: 1952 / cdiv(20000, 16) = 1.56x, as logged."""
    card = card_from_config(C.LLAMA_8B)
    pool = 1952 * 16 * 131072 / GIB  # exactly 1952 blocks of 16 tokens
    res = capacity(
        card,
        load_profile("vllm"),
        80.0,
        weights_gib=80 * 0.92 - pool,
        max_model_len=20000,
        overheads={"activation_peak": 0, "non_torch": 0, "cuda_graph": 0},
    )
    assert res.num_blocks == 1952
    assert res.kv_concurrency == pytest.approx(1.5616, abs=1e-4)
    assert res.max_concurrency == 1 and res.binding_limit == "kv"


def test_sglang_qwq32b_on_4_l4_matches_46611_logged_tokens() -> None:
    """capacity.md §2: 6.09 - 21.63 x 0.15 = 2.85 GiB / 65,536 B = 46.5k vs 46,611 logged."""
    res = capacity(
        card_from_config(C.QWQ_32B),
        load_profile("sglang"),
        22.49,
        tp=4,
        free_gib=21.63,
        weights_gib=21.63 - 6.09,
        knobs=Knobs(memory_fraction=0.85),
        max_model_len=32768,
    )
    assert res.instance.kv_pool_gib == pytest.approx(2.85, rel=0.01)
    assert res.tokens == pytest.approx(46611, rel=0.01)


def test_same_number_means_different_pools_per_engine() -> None:
    """0.9 is a share of total in vLLM, of free-after-load in TRT-LLM (engines.md §1e)."""
    card = card_from_config(C.LLAMA_8B)
    over = {"activation_peak": 4.74, "non_torch": 0.13, "cuda_graph": 0.0}
    vllm = capacity(
        card,
        load_profile("vllm"),
        H100,
        knobs=Knobs(memory_fraction=0.9),
        weights_gib=14.99,
        overheads=over,
        max_model_len=8192,
    )
    trt = capacity(
        card,
        load_profile("trtllm"),
        H100,
        knobs=Knobs(memory_fraction=0.9),
        weights_gib=14.99,
        overheads=over,
        max_model_len=8192,
    )
    assert vllm.instance.kv_pool_gib == pytest.approx(0.9 * H100 - 14.99 - 4.87)
    assert trt.instance.kv_pool_gib == pytest.approx((H100 - 14.99 - 4.87) * 0.9)
    assert trt.instance.kv_pool_gib > vllm.instance.kv_pool_gib


def test_tgi_wiggle_room_formula() -> None:
    res = capacity(
        card_from_config(C.LLAMA_8B),
        load_profile("tgi"),
        H100,
        weights_gib=14.99,
        overheads={"activation_peak": 2.0},
        max_model_len=8192,
    )
    assert res.instance.kv_pool_gib == pytest.approx(H100 - 14.99 - 2.0 - (1 - 0.9 * 1.0) * H100)
    assert res.page_tokens == 1


def test_llamacpp_pool_is_ctx_times_bytes_and_slots_share_it() -> None:
    card = card_from_config(C.LLAMA_8B)
    res = capacity(card, load_profile("llamacpp"), 24.0, max_model_len=8192, slots=4, weights_gib=8.0)
    assert res.tokens == 8192 * 4
    assert res.instance.kv_pool_gib == pytest.approx(8192 * 4 * 131072 / GIB)
    assert res.max_concurrency == 4


def test_binding_limit_moves_from_scheduler_cap_to_kv_as_context_grows() -> None:
    res = capacity(
        card_from_config(C.LLAMA_8B),
        load_profile("vllm"),
        H100,
        gpu_name="H100-80G",
        max_model_len=32768,
        max_num_seqs=64,
        **LLAMA8B_LOGGED,
    )
    rows = {r.max_model_len: r for r in res.table}
    assert rows[1024].binding == "max_num_seqs" and rows[1024].concurrency == 64
    assert rows[32768].binding == "kv" and rows[32768].concurrency == 13  # (0.92 x 79.18 - 19.86) / 4 GiB
    default = capacity(
        card_from_config(C.LLAMA_8B),
        load_profile("vllm"),
        H100,
        gpu_name="H100-80G",
        max_model_len=8192,
        **LLAMA8B_LOGGED,
    )
    assert default.limits["max_num_seqs"] == 1024  # H100: >= 70 GiB, not A100 (engines.md §1b)


def test_max_batched_tokens_binds_when_below_max_num_seqs() -> None:
    res = capacity(
        card_from_config(C.QWEN3_06B),
        load_profile("vllm"),
        H100,
        gpu_name="H100-80G",
        max_model_len=1024,
        max_batched_tokens=512,
    )
    assert res.binding_limit == "max_batched_tokens" and res.max_concurrency == 512


def test_a100_gets_the_smaller_vllm_default() -> None:
    res = capacity(card_from_config(C.QWEN3_06B), load_profile("vllm"), 79.15, gpu_name="A100-80G", max_model_len=1024)
    assert res.limits["max_num_seqs"] == 256
    assert res.limits["max_batched_tokens"] == 2048


def test_a_model_that_does_not_fit_says_so() -> None:
    res = capacity(card_from_config(C.QWEN3_235B), load_profile("vllm"), H100, max_model_len=8192, weights_gib=438.0)
    assert not res.instance.starts
    assert "no memory left for KV" in (res.instance.problem or "")


def test_pool_smaller_than_one_request_is_flagged() -> None:
    res = capacity(
        card_from_config(C.LLAMA_8B),
        load_profile("vllm"),
        24.0,
        weights_gib=14.99,
        max_model_len=131072,
        overheads={"activation_peak": 4.0},
    )
    assert res.kv_concurrency < 1
    assert any("cannot hold one request" in w for w in res.warnings)


def test_activation_default_scales_with_batched_tokens_and_overrides_win() -> None:
    profile = load_profile("vllm")
    assert resolve_overheads(profile, None, 2048).activation_peak_gib == pytest.approx(1.3)
    assert resolve_overheads(profile, {"activation_peak": 3.0}, 2048).activation_peak_gib == 3.0
    with pytest.raises(BadInput, match="unknown overhead"):
        resolve_overheads(profile, {"graphs": 1.0})


def test_context_beyond_max_model_len_is_bad_input() -> None:
    with pytest.raises(BadInput, match="exceeds max_model_len"):
        capacity(card_from_config(C.LLAMA_8B), load_profile("vllm"), H100, max_model_len=4096, context=8192)


def test_hybrid_requests_pay_their_state() -> None:
    res = capacity(
        card_from_config(C.QWEN3_NEXT), load_profile("vllm"), H100, weights_gib=40.0, max_model_len=32768, context=4096
    )
    per_token = res.layout.bytes_per_token
    naive = res.instance.kv_pool_gib * GIB / (per_token * 4096)
    assert res.kv_concurrency < naive  # the per-sequence GDN state is not free


@pytest.mark.parametrize(
    ("layers", "kv_heads", "logged_tokens"),
    [(2, 2, 1_048_576), (30, 3, 46_592)],  # tiny-llama-v1 and SmolLM2-135M, test bed vLLM CPU logs 2026-11-29
)
def test_explicit_pool_reproduces_vllm_cpu_logged_tokens(layers: int, kv_heads: int, logged_tokens: int) -> None:
    """VLLM_CPU_KVCACHE_SPACE=1 GiB: 'CPU KV cache size: N tokens' (blocks of 16)."""
    cfg = {
        **C.LLAMA_8B,
        "num_hidden_layers": layers,
        "num_key_value_heads": kv_heads,
        "num_attention_heads": 9 if kv_heads == 3 else 4,
        "head_dim": 64,
        "hidden_size": 576 if kv_heads == 3 else 256,
        "max_position_embeddings": 2048,
    }
    res = capacity(card_from_config(cfg), load_profile("vllm"), 24.0, knobs=Knobs(kv_pool_gib=1.0))
    assert res.tokens == logged_tokens
    assert "explicit" in res.instance.formula


def test_vllm_sliding_layers_keep_window_plus_batched_tokens() -> None:
    """capacity.md §1: a vLLM sliding layer needs cdiv(min(W - 1 + max_num_batched_tokens, C), block) + 1 blocks."""
    card = card_from_config(C.GEMMA2_9B)  # window 4096, 21 sliding + 21 global layers
    big = capacity(card, load_profile("vllm"), 79.18, gpu_name="H100-80G", max_model_len=8192)
    small = capacity(card, load_profile("vllm"), 79.18, gpu_name="H100-80G", max_model_len=8192, max_batched_tokens=512)
    sgl = capacity(card, load_profile("sglang"), 79.18, max_model_len=8192)
    per_block = 16 * (big.layout.bytes_per_token + big.layout.sliding_bytes_per_token)
    assert big.kv_concurrency == pytest.approx(
        big.num_blocks / (8192 * 2 * big.layout.bytes_per_token / per_block), rel=1e-3
    )  # 4096 + 8191 > 8192: slides like a full layer
    assert small.kv_concurrency > big.kv_concurrency  # 4096 + 511 tokens per sliding layer
    assert sgl.kv_concurrency / (sgl.tokens / 8192) == pytest.approx(8192 * 2 / (8192 + 4096 + 1), rel=1e-3)


def test_fp8_kv_warning_comes_from_the_engine_profile() -> None:
    """vLLM's fp8-KV facts below sm89 are its profile's (a 1-byte pool, a dequantizing backend, cited to its
    source); an engine whose profile has none says so instead of borrowing vLLM's words (issue 12 §7)."""
    from switchover.engines import load_profile
    from switchover.hardware import check_capabilities

    vllm, sglang = load_profile("vllm"), load_profile("sglang")
    [w] = check_capabilities("8.6", kv_dtype="fp8", engine=vllm)
    assert w.consequence == vllm.memory.fp8_kv_below.consequence and "fa_utils.py" in w.source
    assert w.needs == f"sm{vllm.memory.fp8_kv_below.min_sm}"
    assert check_capabilities("8.9", kv_dtype="fp8", engine=vllm) == []
    assert sglang.memory.fp8_kv_below is None
    [s] = check_capabilities("8.6", kv_dtype="fp8_e4m3", engine=sglang)
    assert "not in its profile" in s.consequence and "FlashAttention" not in s.consequence
    assert check_capabilities("9.0", kv_dtype="fp8", engine=sglang) == []
