"""Canary: two copies on one GPU pay fixed costs twice; knobs chosen so both start; capacity by canary %."""

from __future__ import annotations

import pytest

from switchover.engines import list_profiles, load_profile
from switchover.model import card_from_config
from switchover.plan.canary import canary_plan
from tests.plan import configs as C

LOGGED = dict(weights_gib=14.99, new_weights_gib=14.99)


@pytest.mark.parametrize("engine", list_profiles())
def test_both_copies_start_and_each_gets_less_than_half(engine: str) -> None:
    plan = canary_plan(card_from_config(C.LLAMA_8B), load_profile(engine), 79.18, context=8192, **LOGGED)
    assert all(c.instance.starts for c in plan.copies), [c.instance.problem for c in plan.copies]
    assert all(0 < c.tokens < plan.single_tokens / 2 for c in plan.copies)


def test_vllm_split_is_half_the_default_utilisation_each() -> None:
    plan = canary_plan(card_from_config(C.LLAMA_8B), load_profile("vllm"), 79.18, context=8192,
                       overheads={"activation_peak": 4.74, "non_torch": 0.13}, **LOGGED)
    assert plan.copies[0].flags == ["--gpu-memory-utilization", "0.46"]
    assert plan.copies[0].instance.kv_pool_gib == pytest.approx(0.46 * 79.18 - 14.99 - 4.87)


def test_explicit_pool_engines_get_token_caps() -> None:
    trt = canary_plan(card_from_config(C.LLAMA_8B), load_profile("trtllm"), 79.18, **LOGGED)
    assert any("kv_cache_config.max_tokens" in f for f in trt.copies[0].flags)
    sgl = canary_plan(card_from_config(C.LLAMA_8B), load_profile("sglang"), 79.18, **LOGGED)
    assert "--max-total-tokens" in sgl.copies[1].flags
    assert sgl.copies[0].tokens == sgl.copies[1].tokens


def test_canary_percent_does_not_change_memory_but_changes_the_bottleneck() -> None:
    plan = canary_plan(card_from_config(C.LLAMA_8B), load_profile("vllm"), 79.18, context=8192,
                       percents=(0, 5, 20, 50, 100), **LOGGED)
    rows = {r.canary_percent: r for r in plan.table}
    assert rows[5].old_concurrency == rows[50].old_concurrency  # same memory at 5% and 50%
    each = plan.copies[0].concurrency
    assert rows[20].sustainable_total == int(each / 0.8)  # the old copy carries 80% of the traffic
    assert rows[50].sustainable_total == 2 * each
    assert rows[0].copies == 1 and rows[0].sustainable_total == plan.single_concurrency


def test_other_residents_can_make_the_second_copy_fail() -> None:
    plan = canary_plan(card_from_config(C.LLAMA_8B), load_profile("vllm"), 79.18, other_residents_gib=30.0,
                       **LOGGED)
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
