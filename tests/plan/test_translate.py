"""translate: intents from launches, target flags, lost-in-translation, and vLLM -> X -> vLLM round trips."""

from __future__ import annotations

from typing import Any

import pytest
import yaml

from switchover.errors import BadInput
from switchover.plan.translate import parse_launch, render, translate

LAUNCHES = [
    "vllm serve meta-llama/Llama-3.1-8B-Instruct --tensor-parallel-size 2 --max-model-len 32768 "
    "--gpu-memory-utilization 0.9 --max-num-seqs 128 --kv-cache-dtype fp8 --no-enable-prefix-caching "
    "--served-model-name llama8b --seed 1 --enable-chunked-prefill --generation-config vllm --port 8001",
    "VLLM_CPU_KVCACHE_SPACE=1 python -m vllm.entrypoints.openai.api_server --model /models/qwen "
    "--served-model-name qwen --max-model-len 8192 --max-num-seqs 64 --host 127.0.0.1 --port 8000 "
    "--chat-template /t/chat.jinja --trust-remote-code",
    "vllm serve deepseek-ai/DeepSeek-V3 -tp 8 --enable-expert-parallel --max-model-len 16k --dtype bfloat16 "
    "--quantization fp8",
]
TARGETS = ["sglang", "trtllm", "tgi", "llamacpp", "vllm"]
KV_FAMILY = {"fp8": "e4m3", "fp8_e4m3": "e4m3", "fp8_e4m3fn": "e4m3", "fp8_e5m2": "e5m2"}


def _reparse(engine: str, tr: Any) -> Any:
    intent = parse_launch(engine, tr.command)
    if tr.yaml_config:
        intent.values.update(parse_launch(engine, yaml.safe_dump(tr.yaml_config)).values)
    return intent


@pytest.mark.parametrize("launch", LAUNCHES)
@pytest.mark.parametrize("target", TARGETS)
def test_round_trip_keeps_every_intent_not_reported_lost(launch: str, target: str) -> None:
    original = parse_launch("vllm", launch)
    forward = render(original, target)
    lost = {item.intent for item in forward.lost}
    back = render(_reparse(target, forward), "vllm")
    final = _reparse("vllm", back)
    assert final.model == original.model
    for intent, value in original.values.items():
        if intent in lost:
            continue
        got = final.values.get(intent)
        if intent == "kv_cache_dtype":
            assert KV_FAMILY.get(str(got)) == KV_FAMILY.get(str(value))
        elif intent == "chunked_prefill" and got is None:
            assert value is True  # on by default in the target: nothing to say, nothing lost
        elif intent == "expert_parallel":
            assert bool(got) == bool(value)
        else:
            assert got == value, f"{intent}: {value!r} came back as {got!r} via {target}"


def test_vllm_to_vllm_is_lossless() -> None:
    tr = translate("vllm", LAUNCHES[0], "vllm")
    assert [i for i in tr.lost if i.kind != "not_understood"] == []


def test_gpu_memory_fraction_is_never_copied_between_engines() -> None:
    for target in ("sglang", "trtllm", "tgi"):
        tr = translate("vllm", LAUNCHES[0], target)
        item = next(i for i in tr.lost if i.intent == "gpu_memory_fraction")
        assert item.kind == "different_meaning" and "plan capacity" in item.detail
        assert "0.9" not in tr.command.split("--port")[0].split("fraction")[-1][:6]


def test_trtllm_gets_yaml_and_loses_generation_config_and_served_name() -> None:
    tr = translate("vllm", LAUNCHES[0], "trtllm")
    assert tr.yaml_config is not None
    assert tr.yaml_config["kv_cache_config"] == {"enable_block_reuse": False, "dtype": "fp8"}
    assert tr.yaml_config["return_perf_metrics"] is True  # vLLM had metrics on by default
    assert "--extra_llm_api_options" in tr.argv
    lost = {i.intent: i for i in tr.lost}
    assert lost["served_model_name"].kind == "no_equivalent"
    assert "api.generation_config_applied" in lost
    assert "api.unknown_field_policy" in lost
    assert "--enable_chunked_prefill" in tr.argv


def test_sglang_spelling_and_inverted_prefix_cache_flag() -> None:
    tr = translate("vllm", LAUNCHES[0], "sglang")
    assert tr.argv[:3] == ["python", "-m", "sglang.launch_server"]
    assert "--disable-radix-cache" in tr.argv and "--enable-metrics" in tr.argv
    assert tr.argv[tr.argv.index("--sampling-defaults") + 1] == "openai"
    assert tr.argv[tr.argv.index("--tp-size") + 1] == "2"
    stops = next(i for i in tr.lost if i.intent == "api.max_stop_strings")
    assert "4" in stops.detail and "32" in stops.detail


def test_tgi_uses_env_for_prefix_caching_and_drops_max_num_seqs() -> None:
    tr = translate("vllm", LAUNCHES[0], "tgi")
    assert tr.env["PREFIX_CACHING"] == "0"
    assert "--max-batch-size" not in tr.argv
    assert next(i for i in tr.lost if i.intent == "max_concurrent_sequences").kind == "different_meaning"
    assert "--num-shard" in tr.argv


def test_llamacpp_context_is_multiplied_by_slots() -> None:
    tr = translate("vllm", LAUNCHES[1], "llamacpp")
    assert tr.argv[tr.argv.index("--ctx-size") + 1] == str(8192 * 64)
    assert tr.argv[tr.argv.index("--parallel") + 1] == "64"
    assert any(i.intent == "max_context_length" and "slots" in i.detail for i in tr.lost)


def test_expert_parallel_becomes_a_size_where_the_target_wants_one() -> None:
    tr = translate("vllm", LAUNCHES[2], "sglang")
    assert tr.argv[tr.argv.index("--ep-size") + 1] == "8"


def test_yaml_launch_is_parsed() -> None:
    intent = parse_launch("vllm", "model: /m\ntensor_parallel_size: 4\nmax-model-len: 4096\n"
                                  "enable_prefix_caching: false\n")
    assert intent.model == "/m"
    assert intent.values == {"tensor_parallel_size": 4, "max_context_length": 4096, "prefix_caching": False}


def test_trtllm_yaml_keys_are_parsed() -> None:
    intent = parse_launch("trtllm", "kv_cache_config:\n  free_gpu_memory_fraction: 0.8\n  enable_block_reuse: "
                                    "false\nmax_batch_size: 64\n")
    assert intent.values == {"gpu_memory_fraction": 0.8, "prefix_caching": False, "max_concurrent_sequences": 64}


@pytest.mark.parametrize(("text", "value"), [("16k", 16000), ("16K", 16384), ("25.6k", 25600), ("8192", 8192)])
def test_vllm_human_readable_lengths(text: str, value: int) -> None:
    assert parse_launch("vllm", f"vllm serve m --max-model-len {text}").values["max_context_length"] == value


def test_unknown_flags_are_reported_not_dropped() -> None:
    tr = translate("vllm", "vllm serve m --speculative-config '{}' --max-model-len 100", "sglang")
    assert any(i.kind == "not_understood" and "--speculative-config" in i.detail for i in tr.lost)


def test_bad_values_and_inputs_are_bad_input() -> None:
    with pytest.raises(BadInput, match="expected an integer"):
        parse_launch("vllm", "vllm serve m --max-model-len lots")
    with pytest.raises(BadInput, match="needs a value"):
        parse_launch("vllm", "vllm serve m --max-model-len")
    with pytest.raises(BadInput, match="empty"):
        parse_launch("vllm", "  ")
    with pytest.raises(BadInput, match="unknown engine"):
        translate("vllm", LAUNCHES[0], "ollama")


def test_llamacpp_launch_parses_short_flags_and_per_slot_context() -> None:
    intent = parse_launch("llamacpp", "llama-server -m F.gguf --alias tiny -c 4096 -np 4 -t 2 --metrics --jinja")
    assert intent.model == "F.gguf"
    assert intent.values["max_context_length"] == 1024  # explicit slots: -c is shared
    assert intent.values["served_model_name"] == "tiny" and intent.values["metrics_enable"] is True
    assert "-t 2" in intent.unknown


@pytest.mark.parametrize("target", ["sglang", "trtllm", "tgi"])
def test_memory_knob_is_converted_to_the_same_pool_with_model_and_gpu(target: str) -> None:
    from switchover.engines import load_profile
    from switchover.model import card_from_config
    from switchover.plan.equivalence import equivalent_memory_knob
    from tests.plan import configs as C

    card = card_from_config(C.LLAMA_8B)
    eq = equivalent_memory_knob(card, load_profile("vllm"), load_profile(target), 79.18, 0.9)
    assert eq is not None and eq.intent == "gpu_memory_fraction"
    assert eq.pool_gib == pytest.approx(eq.source_pool_gib, rel=0.01)
    assert eq.value != 0.9
    tr = translate("vllm", "vllm serve m --gpu-memory-utilization 0.9", target, card=card, gpu_total_gib=79.18)
    spec = load_profile(target).flags["gpu_memory_fraction"]
    rendered = tr.argv[tr.argv.index(spec.flag) + 1] if spec.flag in tr.argv else None
    assert rendered == str(eq.value)
    assert any(i.intent == "gpu_memory_fraction" and "converted, not copied" in i.detail for i in tr.lost)


def test_llamacpp_gets_as_many_slots_as_the_same_memory_holds() -> None:
    from switchover.model import card_from_config
    from tests.plan import configs as C

    tr = translate("vllm", "vllm serve m --gpu-memory-utilization 0.9 --max-model-len 8192 --max-num-seqs 128",
                   "llamacpp", card=card_from_config(C.LLAMA_8B), gpu_total_gib=79.18)
    slots = int(tr.argv[tr.argv.index("--parallel") + 1])
    assert 40 < slots < 128  # ~51 GiB at 1 GiB per 8192-token slot
    assert int(tr.argv[tr.argv.index("--ctx-size") + 1]) == slots * 8192


def test_trtllm_extra_options_file_is_read_and_overrides(tmp_path) -> None:  # type: ignore[no-untyped-def]
    cfg = tmp_path / "extra.yaml"
    cfg.write_text("kv_cache_config:\n  enable_block_reuse: false\n  dtype: fp8\nmax_batch_size: 32\n")
    intent = parse_launch("trtllm", f"trtllm-serve /m --max_batch_size 64 --extra_llm_api_options {cfg}")
    assert intent.values["max_concurrent_sequences"] == 32  # the YAML wins, as in trtllm-serve
    assert intent.values["prefix_caching"] is False and intent.values["kv_cache_dtype"] == "fp8"
    missing = parse_launch("trtllm", "trtllm-serve /m --extra_llm_api_options /nope.yaml")
    assert any("not found" in u for u in missing.unknown)


@pytest.mark.parametrize(("engine", "launch"), [
    ("sglang", "python3 -m sglang_router.launch_server --model-path /models/qwen --tp-size 2"),
    ("llamacpp", "/opt/llama.cpp/build/bin/llama-server -m /models/qwen.gguf --ctx-size 4096"),
    ("tgi", "text-generation-launcher --model-id /models/qwen --max-total-tokens 4096"),
])
def test_every_profile_spelling_of_the_command_is_recognised(engine: str, launch: str) -> None:
    intent = parse_launch(engine, launch)  # command words and model flags come from the engine profiles
    assert intent.model is not None and intent.model.startswith("/models/qwen")
    assert not intent.unknown, intent.unknown


def test_vllm_and_sglang_config_files_lose_to_the_command_line_trtllm_files_win(tmp_path) -> None:  # type: ignore[no-untyped-def]
    cfg = tmp_path / "c.yaml"
    cfg.write_text("max-model-len: 8192\nmax-num-seqs: 64\n")
    vllm = parse_launch("vllm", f"vllm serve /m --max-model-len 4096 --config {cfg}")
    assert vllm.values["max_context_length"] == 4096 and vllm.values["max_concurrent_sequences"] == 64
    cfg.write_text("context-length: 8192\n")
    sglang = parse_launch("sglang", f"python -m sglang.launch_server --model-path /m --context-length 4096 "
                                    f"--config {cfg}")
    assert sglang.values["max_context_length"] == 4096
    tgi = parse_launch("tgi", f"text-generation-launcher --model-id /m --config {cfg}")
    assert any("--config" in u for u in tgi.unknown)  # TGI has no config-file flag: not read as one
