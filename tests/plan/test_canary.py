"""Canary: two copies on one GPU pay fixed costs twice; knobs chosen so both start; capacity by canary %."""

from __future__ import annotations

import pytest

from switchover.engines import list_profiles, load_profile
from switchover.model import card_from_config
from switchover.plan.canary import canary_plan
from tests.plan import configs as C

LOGGED = dict(weights_gib=14.99, new_weights_gib=14.99)


@pytest.mark.parametrize("engine", [e for e in list_profiles() if load_profile(e).memory.budget != "explicit_context"])
def test_both_copies_start_and_each_gets_less_than_half(engine: str) -> None:
    plan = canary_plan(card_from_config(C.LLAMA_8B), load_profile(engine), 79.18, context=8192, **LOGGED)
    assert all(c.instance.starts for c in plan.copies), [c.instance.problem for c in plan.copies]
    assert all(0 < c.tokens < plan.single_tokens / 2 for c in plan.copies)


def test_an_explicit_context_copy_keeps_its_own_context_when_two_fit_and_shrinks_when_not() -> None:
    """llama.cpp's pool is the -c it is given: two copies of an 8B at its 131,072-token default fit an H100 (each
    keeps the single copy's context); with 30 GiB of weights each they do not (each is cut to its share)."""
    card, profile = card_from_config(C.LLAMA_8B), load_profile("llamacpp")
    roomy = canary_plan(card, profile, 79.18, context=8192, **LOGGED)
    assert [c.tokens for c in roomy.copies] == [roomy.single_tokens] * 2 == [131072] * 2
    tight = canary_plan(card, profile, 79.18, context=8192, weights_gib=30.0, new_weights_gib=30.0)
    assert all(c.instance.starts and 8192 <= c.tokens < tight.single_tokens for c in tight.copies), tight.copies


def test_vllm_split_is_half_the_default_utilisation_each() -> None:
    plan = canary_plan(
        card_from_config(C.LLAMA_8B),
        load_profile("vllm"),
        79.18,
        context=8192,
        overheads={"activation_peak": 4.74, "non_torch": 0.13},
        **LOGGED,
    )
    assert plan.copies[0].flags == ["--gpu-memory-utilization", "0.46"]
    graphs = 0.3  # the CUDA-graph estimate the vLLM >=0.32 band subtracts (engines/data/vllm.yaml)
    assert plan.copies[0].instance.kv_pool_gib == pytest.approx(0.46 * 79.18 - 14.99 - 4.87 - graphs)


def test_explicit_pool_engines_get_token_caps() -> None:
    trt = canary_plan(card_from_config(C.LLAMA_8B), load_profile("trtllm"), 79.18, **LOGGED)
    assert any("kv_cache_config.max_tokens" in f for f in trt.copies[0].flags)
    sgl = canary_plan(card_from_config(C.LLAMA_8B), load_profile("sglang"), 79.18, **LOGGED)
    assert "--max-total-tokens" in sgl.copies[1].flags
    assert sgl.copies[0].tokens == sgl.copies[1].tokens


def test_canary_percent_does_not_change_memory_but_changes_the_bottleneck() -> None:
    plan = canary_plan(
        card_from_config(C.LLAMA_8B), load_profile("vllm"), 79.18, context=8192, percents=(0, 5, 20, 50, 100), **LOGGED
    )
    rows = {r.canary_percent: r for r in plan.table}
    assert rows[5].old_concurrency == rows[50].old_concurrency  # same memory at 5% and 50%
    each = plan.copies[0].concurrency
    assert rows[20].sustainable_total == int(each / 0.8)  # the old copy carries 80% of the traffic
    assert rows[50].sustainable_total == 2 * each
    assert rows[0].copies == 1 and rows[0].sustainable_total == plan.single_concurrency


def test_other_residents_can_make_the_second_copy_fail() -> None:
    plan = canary_plan(card_from_config(C.LLAMA_8B), load_profile("vllm"), 79.18, other_residents_gib=30.0, **LOGGED)
    assert not plan.copies[1].instance.starts
    assert any("refuses to start" in w for w in plan.warnings)


def test_a_canary_from_estimated_weights_or_unmodelled_overheads_says_so() -> None:
    card = card_from_config(C.LLAMA_8B)  # no weight files: a bf16 estimate
    plan = canary_plan(card, load_profile("vllm"), 79.18)
    assert any(w.startswith("old weights:") and "16-bit estimate" in w for w in plan.warnings)
    given = canary_plan(card, load_profile("vllm"), 79.18, weights_gib=14.99, new_weights_gib=14.99)
    assert not any("weights:" in w for w in given.warnings)
    plan = canary_plan(card, load_profile("tgi"), 79.18, **LOGGED)  # TGI's profile has no non-torch figure
    assert any("non_torch overhead is not modelled for tgi" in w for w in plan.warnings)


def test_a_canary_copy_pays_the_same_overheads_as_plan_capacity_prices() -> None:
    """Issue 21: on H100 / Llama-3.1-8B `plan canary` priced 5.33 GiB of overhead per vLLM copy (the profile's flat
    defaults) and `plan capacity` 2.52 GiB (the version's overhead model): 430,544 vs 453,552 tokens."""
    from switchover.plan.capacity import capacity

    card, profile = card_from_config(C.LLAMA_8B), load_profile("vllm")
    plan = canary_plan(card, profile, 79.18, context=8192)
    single = capacity(card, profile, 79.18, context=8192)
    assert plan.single_tokens == single.tokens
    assert plan.copies[0].instance.overheads_gib == pytest.approx(single.instance.overheads_gib)
