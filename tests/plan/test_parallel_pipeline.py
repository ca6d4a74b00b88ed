"""Pipeline placement: layers per stage under each engine's split rule, the embedding on the first stage, the final
norm and lm_head on the last (a tied lm_head's copy where the engine keeps one), and the heaviest stage priced in
`plan parallel`."""

from __future__ import annotations

import pytest

from switchover.engines import load_profile
from switchover.model import card_from_config
from switchover.plan.parallel import plan_layouts
from switchover.plan.pipeline import placement, rule_for, rules, stage_layers
from tests.plan import configs as C

GIB = 2**30


@pytest.mark.parametrize(
    ("layers", "pp", "split", "parts"),
    [
        (32, 4, "remainder_before_last", [8, 8, 8, 8]),
        (30, 4, "remainder_before_last", [7, 8, 8, 7]),  # vLLM get_pp_indices: second-to-last backwards
        (61, 4, "remainder_before_last", [15, 15, 16, 15]),
        (5, 2, "remainder_before_last", [3, 2]),
        (30, 4, "remainder_on_last", [7, 7, 7, 9]),  # SGLang 0.5.5: every leftover on the last
        (30, 4, "remainder_on_last_stages", [7, 7, 8, 8]),  # SGLang 0.5.23: one each to the last stages
        (7, 1, "remainder_before_last", [7]),
    ],
)
def test_layers_split_across_stages_by_the_engines_rule(layers: int, pp: int, split: str, parts: list[int]) -> None:
    assert stage_layers(layers, pp, split) == parts  # type: ignore[arg-type]
    assert sum(parts) == layers


def test_the_embedding_is_on_the_first_stage_and_lm_head_on_the_last() -> None:
    card = card_from_config(C.LLAMA_8B)  # untied: 128256 x 4096 each, 0.98 GiB in 16 bits
    p = placement(card, "vllm", "0.32.0", tp=1, pp=4)
    assert p.stages[0].holds == ["embedding"] and p.stages[3].holds == ["final norm", "lm_head"]
    assert p.stages[1].holds == [] and p.stages[2].holds == []
    edge = 128256 * 4096 * 2 / GIB
    assert p.stages[0].weights_gib_per_gpu - p.stages[1].weights_gib_per_gpu == pytest.approx(edge, abs=0.002)
    assert p.heaviest_stage == 0 and p.heaviest_gib > card.weights.total_bytes / 4 / GIB
    assert sum(s.weights_gib_per_gpu for s in p.stages) == pytest.approx(card.weights.total_bytes / GIB, abs=0.01)


def test_tp_splits_the_embedding_and_lm_head_over_the_vocabulary() -> None:
    card = card_from_config(C.LLAMA_8B)
    one, two = placement(card, "vllm", "0.32.0", 1, 2), placement(card, "vllm", "0.32.0", 2, 2)
    assert two.stages[0].weights_gib_per_gpu == pytest.approx(one.stages[0].weights_gib_per_gpu / 2, rel=0.01)


def test_vllm_keeps_a_copy_of_a_tied_embedding_on_the_last_stage() -> None:
    card = card_from_config({**C.LLAMA_8B, "tie_word_embeddings": True})
    p = placement(card, "vllm", "0.32.0", tp=1, pp=2)
    assert "a copy of the embedding for the tied lm_head" in p.stages[1].holds
    assert p.stages[0].weights_gib_per_gpu == pytest.approx(p.stages[1].weights_gib_per_gpu, abs=0.002)
    assert sum(s.weights_gib_per_gpu for s in p.stages) > card.weights.total_bytes / GIB  # the copy is extra
    assert any("v0.32.0/vllm/model_executor/models/llama.py" in s for s in p.sources)


def test_an_engine_whose_tied_copy_is_unread_says_so_with_the_bytes_at_stake() -> None:
    card = card_from_config({**C.LLAMA_8B, "tie_word_embeddings": True})
    p = placement(card, "sglang", "0.5.23", tp=1, pp=2)
    assert "a copy of the embedding for the tied lm_head" not in p.stages[1].holds
    assert any("not in the data" in n and "0.98 GiB" in n for n in p.notes)


def test_a_release_no_entry_covers_is_planned_with_the_newest_rule_and_said() -> None:
    rule, note = rule_for("vllm", "0.6.3")
    assert rule is not None and rule.read_at == "0.32.0"
    assert note is not None and "0.6.3" in note and "not read" in note
    assert rule_for("vllm", "0.32.0")[1] is None


def test_an_engine_without_a_rule_is_said_and_priced_evenly() -> None:
    card = card_from_config(C.LLAMA_8B)
    p = placement(card, "trtllm", None, tp=1, pp=2)
    assert any("not in the data" in n for n in p.notes) and p.sources == []


def test_every_rule_cites_the_engines_source_at_its_release() -> None:
    for engine, entries in rules().items():
        for rule in entries:
            assert all(s.startswith("https://github.com/") for s in rule.sources), engine
            assert all(f"v{rule.read_at}/" in s for s in rule.sources), (engine, rule.read_at)


def test_plan_parallel_prices_a_pp_layout_by_its_heaviest_stage() -> None:
    card = card_from_config(C.LLAMA_8B)
    layouts = plan_layouts(
        card, load_profile("vllm", "0.32.0"), 4, 79.18, gpu_name="H100-80G", max_model_len=8192, engine_version="0.32.0"
    )
    pp4 = next(x for x in layouts if (x.tp, x.pp) == (1, 4))
    assert pp4.legal and pp4.pipeline is not None
    even = card.weights.total_bytes / 4 / GIB  # what a 1/PP share (the price before placement) says
    assert pp4.weights_gib_per_gpu == pytest.approx(pp4.pipeline.heaviest_gib)
    assert pp4.weights_gib_per_gpu is not None and pp4.weights_gib_per_gpu > even + 0.45  # + E/2 (E: 0.98 GiB)
    assert any(r.startswith("heaviest stage 0 (layers 0-7, embedding)") for r in pp4.reasons)
    tp4 = next(x for x in layouts if (x.tp, x.pp) == (4, 1))
    assert tp4.pipeline is None


def test_plan_capacity_prices_a_pipeline_layout_by_its_heaviest_stage() -> None:
    from switchover.plan.capacity import capacity, weights_per_gpu_gib

    card = card_from_config(C.LLAMA_8B)
    result = capacity(card, load_profile("vllm"), 80.0, tp=1, pp=4, engine_version="0.32.0")
    heaviest = placement(card, "vllm", "0.32.0", tp=1, pp=4).heaviest_gib
    assert result.instance.weights_gib == pytest.approx(heaviest)
    assert result.instance.weights_gib > weights_per_gpu_gib(card, 1, 4)  # the 1/PP share understated it
