"""Parallel layouts: legality with reasons, ranking, and the impossible-plan error."""

from __future__ import annotations

import pytest

from switchover.engines import load_profile
from switchover.errors import BadInput, ExitCode
from switchover.model import card_from_config
from switchover.plan.parallel import check_layout, plan_layouts, shape_problems
from tests.plan import configs as C


def test_tp3_on_32_heads_is_impossible_with_both_reasons() -> None:
    card = card_from_config(C.LLAMA_8B)
    with pytest.raises(BadInput) as info:
        check_layout(card, load_profile("vllm"), tp=3, pp=1)
    assert info.value.exit_code == ExitCode.BAD_INPUT
    assert "TP=3 does not divide the 32 attention heads" in info.value.message
    assert "8 KV heads" in info.value.message


@pytest.mark.parametrize(
    ("tp", "legal"), [(1, True), (2, True), (4, True), (8, True), (16, True), (32, True), (6, False), (12, False)]
)
def test_tp_must_divide_heads_and_kv_heads_divide_or_replicate(tp: int, legal: bool) -> None:
    problems = shape_problems(card_from_config(C.LLAMA_8B), load_profile("vllm"), tp, 1)
    assert (problems == []) is legal


def test_engine_without_tp_or_pp_rejects_them_from_profile_data() -> None:
    card = card_from_config(C.LLAMA_8B)
    assert any("no tensor parallelism" in p for p in shape_problems(card, load_profile("llamacpp"), 2, 1))
    assert any("no pipeline parallelism" in p for p in shape_problems(card, load_profile("tgi"), 1, 2))


def test_experts_must_divide_by_ep_and_dense_models_have_none() -> None:
    assert shape_problems(card_from_config(C.QWEN3_235B), load_profile("vllm"), 4, 1, ep=8) == []
    assert any("experts" in p for p in shape_problems(card_from_config(C.QWEN3_235B), load_profile("vllm"), 4, 1, ep=3))
    assert any("dense" in p for p in shape_problems(card_from_config(C.LLAMA_8B), load_profile("vllm"), 2, 1, ep=2))


def test_hybrid_linear_heads_must_divide_too() -> None:
    problems = shape_problems(card_from_config(C.QWEN3_NEXT), load_profile("vllm"), 64, 1)
    assert any("gdn heads" in p for p in problems)


def test_layouts_for_8_gpus_are_ranked_by_kv_per_replica_and_illegal_ones_explained() -> None:
    card = card_from_config(C.LLAMA_8B)
    layouts = plan_layouts(card, load_profile("vllm"), 8, 79.18, gpu_name="H100-80G", max_model_len=8192)
    legal = [x for x in layouts if x.legal]
    illegal = [x for x in layouts if not x.legal]
    assert legal and illegal
    kv = [x.kv_tokens_per_replica or 0 for x in legal]
    assert kv == sorted(kv, reverse=True)
    assert all(x.reasons for x in illegal)
    tp3 = next(x for x in illegal if x.tp == 3 and x.pp == 1)
    assert tp3.dp == 2 and "32 attention heads" in tp3.reasons[0]
    tp1 = next(x for x in legal if (x.tp, x.pp) == (1, 1))
    assert tp1.dp == 8 and tp1.total_concurrency == tp1.concurrency_per_replica * 8  # type: ignore[operator]
    tp8 = next(x for x in legal if (x.tp, x.pp) == (8, 1))
    assert (tp8.kv_tokens_per_replica or 0) > (tp1.kv_tokens_per_replica or 0)


def test_idle_gpus_are_noted() -> None:
    layouts = plan_layouts(card_from_config(C.LLAMA_8B), load_profile("vllm"), 3, 79.18, max_model_len=8192)
    two = next(x for x in layouts if (x.tp, x.pp) == (2, 1))
    assert two.dp == 1 and "1 GPU(s) idle" in two.reasons


def test_mla_tp_buys_no_kv_per_gpu() -> None:
    card = card_from_config(C.DEEPSEEK_V3)
    one = shape_problems(card, load_profile("vllm"), 8, 1)
    assert one == []


def test_zero_gpus_is_bad_input() -> None:
    with pytest.raises(BadInput):
        plan_layouts(card_from_config(C.LLAMA_8B), load_profile("vllm"), 0, 80.0)
