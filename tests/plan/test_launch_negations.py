"""Negative spellings read from the packaged release data: every spelling that turns an option off does so."""

from __future__ import annotations

from switchover.plan.launch import parse_launch


def test_a_further_negative_spelling_turns_the_option_off() -> None:
    """llama.cpp's `-no-kvu` is a second negation of --kv-unified beside --no-kv-unified (common/arg.cpp at b11434,
    https://github.com/ggml-org/llama.cpp/blob/b11434/common/arg.cpp): slots then split the context."""
    off = parse_launch("llamacpp", "llama-server -m m.gguf -c 8192 -np 4 -no-kvu", version="b11434")
    on = parse_launch("llamacpp", "llama-server -m m.gguf -c 8192 -np 4 -kvu", version="b11434")
    assert off.values["kv_unified"] is False and off.values["max_context_length"] == 2048
    assert on.values["kv_unified"] is True and on.values["max_context_length"] == 8192


def test_an_engine_variable_read_under_its_renamed_prefix_says_so() -> None:
    """SGLang 0.5.3+ reads SGL_X as SGLANG_X (python/sglang/srt/environ.py at v0.5.23): ok, and the output says how."""
    intent = parse_launch(
        "sglang", "SGL_ENABLE_JIT_DEEPGEMM=1 python -m sglang.launch_server --model-path M", version="0.5.23"
    )
    record = next(r for r in intent.inputs if r.typed == "SGL_ENABLE_JIT_DEEPGEMM")
    assert record.validity == "ok" and "read as SGLANG_ENABLE_JIT_DEEPGEMM" in (record.validity_detail or "")
