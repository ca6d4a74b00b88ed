"""Capability warnings use the named engine's profile; with no engine, that it is not known is said."""

from __future__ import annotations

from switchover.engines import load_profile
from switchover.hardware import check_capabilities


def test_fp8_kv_with_no_engine_says_the_engine_is_not_known_and_names_every_profile() -> None:
    [w] = check_capabilities("8.6", kv_dtype="fp8")
    assert w.consequence.startswith("the engine is not given, so what it does with fp8 KV on this GPU is not known")
    assert "vLLM below sm89:" in w.consequence  # the one profile that read it, named as such
    assert "Not read from the source of: SGLang" in w.consequence


def test_fp8_kv_for_an_engine_whose_profile_has_no_facts_is_not_given_vllms() -> None:
    [w] = check_capabilities("8.6", kv_dtype="fp8", engine=load_profile("tgi"))
    assert "not in its profile" in w.consequence and "FlashAttention" not in w.consequence


def test_fp8_kv_on_a_native_fp8_gpu_warns_for_no_engine() -> None:
    assert check_capabilities("9.0", kv_dtype="fp8") == []
