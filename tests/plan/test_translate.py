"""translate: every input flag lands in exactly one list, the target's spellings hold at its version, the wrong
mappings issue 21 saw stay fixed, and vLLM -> X -> vLLM round trips keep every intent not reported lost."""

from __future__ import annotations

from typing import Any

import pytest
import yaml

from switchover.engines.releases import EngineReleases, ParserRules
from switchover.model import card_from_config
from switchover.plan.translate import Translation, parse_launch, render, translate
from tests.plan import configs as C
from tests.plan.records import after, outcomes
from tests.plan.release_data import engine_data, span

CONTRACT = {
    "source_engine",
    "source_version",
    "source_note",
    "target_engine",
    "target_version",
    "target_note",
    "argv",
    "env",
    "yaml_config",
    "command",
    "flags",
    "derived",
    "steps",
    "api",
}
FLAG_CONTRACT = {"input", "outcome", "rendered", "detail", "source"}
INPUT_CONTRACT = {"typed", "option", "value", "via", "validity", "validity_detail", "intent"}
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

# no engine has release data unless a test adds it (conftest.no_release_data)
pytestmark = pytest.mark.usefixtures("no_release_data")


def _reparse(engine: str, tr: Translation) -> Any:
    intent = parse_launch(engine, tr.command)
    if tr.yaml_config:
        intent.values.update(parse_launch(engine, yaml.safe_dump(tr.yaml_config)).values)
    return intent


@pytest.mark.parametrize("launch", LAUNCHES)
@pytest.mark.parametrize("target", TARGETS)
def test_round_trip_keeps_every_intent_not_reported_lost(launch: str, target: str) -> None:
    original = parse_launch("vllm", launch)
    forward = render(original, target)
    lost = {f.input.intent for f in forward.flags if f.outcome == "lost"}
    back = render(_reparse(target, forward), "vllm")
    final = _reparse("vllm", back)
    if target != "llamacpp":  # llama.cpp loads the GGUF file the conversion step writes
        assert final.model == original.model
    for intent, value in original.values.items():
        if intent in lost:
            continue
        got = final.values.get(intent)
        if intent == "kv_cache_dtype":
            assert KV_FAMILY.get(str(got)) == KV_FAMILY.get(str(value))
        elif intent in ("chunked_prefill", "dtype") and got is None:
            assert value in (True, "bfloat16")  # the target's default: nothing to say, nothing lost
        elif intent == "expert_parallel":
            assert bool(got) == bool(value)
        else:
            assert got == value, f"{intent}: {value!r} came back as {got!r} via {target}"


@pytest.mark.parametrize("launch", LAUNCHES)
@pytest.mark.parametrize("target", TARGETS)
def test_every_input_flag_lands_in_exactly_one_list(launch: str, target: str) -> None:
    tr = translate("vllm", launch, target)
    intent = parse_launch("vllm", launch)
    assert [f.input for f in tr.flags] == intent.inputs
    assert all(f.outcome in ("translated", "default_matches", "lost", "passed_through") for f in tr.flags)
    assert all(f.detail for f in tr.flags if f.outcome == "lost")


def test_the_json_contract_keys_are_there() -> None:
    data = translate("vllm", LAUNCHES[0], "sglang").model_dump(mode="json")
    assert set(data) >= CONTRACT
    assert all(set(f) >= FLAG_CONTRACT and set(f["input"]) >= INPUT_CONTRACT for f in data["flags"])
    assert data["api"] and {"intent", "kind", "detail", "source"} <= set(data["api"][0])


def test_vllm_to_vllm_loses_nothing() -> None:
    tr = translate("vllm", LAUNCHES[0], "vllm")
    assert [f.input.typed for f in tr.flags if f.outcome == "lost"] == [] and tr.api == []


def test_gpu_memory_fraction_is_never_copied_between_engines() -> None:
    for target in ("sglang", "trtllm", "tgi"):
        item = outcomes(translate("vllm", LAUNCHES[0], target))["--gpu-memory-utilization"]
        assert item.outcome == "lost" and item.kind == "different_meaning" and "plan capacity" in item.detail


def test_trtllm_gets_yaml_and_loses_generation_config_and_served_name() -> None:
    tr = translate("vllm", LAUNCHES[0], "trtllm")
    assert tr.yaml_config is not None
    assert tr.yaml_config["kv_cache_config"] == {"enable_block_reuse": False, "dtype": "fp8"}
    assert tr.yaml_config["return_perf_metrics"] is True  # vLLM had metrics on by default
    assert any(d.what == "metrics_enable" for d in tr.derived)
    assert "--extra_llm_api_options" in tr.argv and "--enable_chunked_prefill" in tr.argv
    out = outcomes(tr)
    assert out["--served-model-name"].outcome == "lost" and out["--served-model-name"].kind == "no_equivalent"
    assert {"api.generation_config_applied", "api.unknown_field_policy"} <= {a.intent for a in tr.api}


def test_sglang_spelling_and_inverted_prefix_cache_flag() -> None:
    tr = translate("vllm", LAUNCHES[0], "sglang")
    assert tr.argv[:3] == ["python", "-m", "sglang.launch_server"]
    assert "--disable-radix-cache" in tr.argv and "--enable-metrics" in tr.argv
    assert after(tr, "--sampling-defaults") == "openai"
    assert after(tr, "--tp-size") == "2"


def test_tgi_uses_env_for_prefix_caching_and_drops_max_num_seqs() -> None:
    tr = translate("vllm", LAUNCHES[0], "tgi")
    assert tr.env["PREFIX_CACHING"] == "0" and "--max-batch-size" not in tr.argv and "--num-shard" in tr.argv
    assert outcomes(tr)["--max-num-seqs"].kind == "different_meaning"


# ---- the wrong mappings issue 21 saw ------------------------------------------------------------------------------


def test_llamacpp_ctx_size_0_is_the_models_context_not_max_model_len_0() -> None:
    tr = translate("llamacpp", "llama-server -m /m/F.gguf -c 0 -np 4", "vllm")
    assert "--max-model-len" not in tr.argv
    assert outcomes(tr)["-c"].outcome == "default_matches"
    back = translate("llamacpp", "llama-server -m /m/F.gguf -c 0 -np 4", "llamacpp")
    assert after(back, "--ctx-size") == "0"


def test_cache_ram_minus_one_is_a_value_not_a_flag() -> None:
    tr = translate("llamacpp", "llama-server -m F.gguf --cache-ram -1 -ngl 99", "llamacpp")
    assert [f.input.typed for f in tr.flags] == ["-m", "--cache-ram", "-ngl"]
    assert outcomes(tr)["--cache-ram"].input.value == "-1"


@pytest.mark.parametrize(
    "source",
    [
        ("tgi", "text-generation-launcher --model-id /m.gguf --max-total-tokens 4096 --max-batch-size 8"),
        (
            "sglang",
            "python -m sglang.launch_server --model-path /m.gguf --context-length 4096 --max-running-requests 8",
        ),
    ],
)
def test_llamacpp_context_times_slots_comes_with_parallel(source: tuple[str, str]) -> None:
    tr = translate(source[0], source[1], "llamacpp")
    assert after(tr, "--ctx-size") == str(4096 * 8)
    assert after(tr, "--parallel") == "8"


def test_dtype_auto_is_not_given_to_tgi() -> None:
    tr = translate("vllm", "vllm serve m --dtype auto", "tgi")
    assert "--dtype" not in tr.argv and outcomes(tr)["--dtype"].outcome == "default_matches"
    half = translate("vllm", "vllm serve m --dtype half", "tgi")
    assert after(half, "--dtype") == "float16"


def test_ep_size_that_does_not_divide_tp_is_not_given_to_sglang() -> None:
    tr = translate("trtllm", "trtllm-serve /m --ep_size 8", "sglang")
    assert "--ep-size" not in tr.argv
    item = outcomes(tr)["--ep_size"]
    assert item.outcome == "lost" and "must divide" in item.detail and "engine.py" in (item.source or "")
    ok = translate("trtllm", "trtllm-serve /m --tp_size 8 --ep_size 8", "sglang")
    assert after(ok, "--ep-size") == "8"


def test_trtllm_option_names_are_the_ones_its_version_has(no_release_data: dict[str, EngineReleases]) -> None:
    no_release_data["trtllm"] = engine_data(
        "trtllm",
        ParserRules(source="serve.py"),
        {
            "1.2.0rc1": {
                "--tp_size": span(kind="int"),
                "--max_seq_len": span(kind="int"),
                "--max_batch_size": span(kind="int"),
            }
        },
    )
    tr = translate("vllm", "vllm serve m -tp 2 --max-model-len 4096", "trtllm")
    assert "--tp_size" in tr.argv and "--tensor_parallel_size" not in tr.argv
    assert tr.target_version == "1.2.0rc1"


def test_sglang_tp_8_abbreviation_becomes_vllm_tensor_parallel_8(no_release_data: dict[str, EngineReleases]) -> None:
    no_release_data["sglang"] = engine_data(
        "sglang",
        ParserRules(abbrev=True, source="server_args.py"),
        {"0.4.0": {"--model-path": span(), "--tp-size": span(kind="int"), "--tokenizer-path": span()}},
    )
    tr = translate("sglang", "python -m sglang.launch_server --model-path M --tp 8", "vllm")
    assert after(tr, "--tensor-parallel-size") == "8"
    assert outcomes(tr)["--tp"].input.option == "--tp-size"


# ---- versions -----------------------------------------------------------------------------------------------------


def test_vllm_upgrade_moves_speculative_flags_into_the_json_config() -> None:
    tr = translate(
        "vllm",
        "vllm serve M --speculative-model D --num-speculative-tokens 4 "
        "--speculative-max-model-len 8192 --use-v2-block-manager --disable-log-requests",
        "vllm",
        source_version="0.6.3",
        target_version="0.11.0",
    )
    spec = after(tr, "--speculative-config")
    assert yaml.safe_load(spec) == {"model": "D", "num_speculative_tokens": 4, "max_model_len": 8192}
    out = outcomes(tr)
    assert out["--num-speculative-tokens"].outcome == "translated"
    assert out["--use-v2-block-manager"].outcome == "default_matches"  # the only block manager by then
    assert out["--disable-log-requests"].outcome == "default_matches"  # requests are not logged by default
    assert "--disable-log-requests" not in tr.argv and "--enable-log-requests" not in tr.argv


def test_a_removed_option_is_lost_with_the_release_it_was_last_in(no_release_data: dict[str, Any]) -> None:
    no_release_data["vllm"] = engine_data(
        "vllm",
        ParserRules(underscores=True, source="u.py"),
        {
            "0.6.3": {"--model": span(), "--swap-space": span(kind="float"), "--worker-use-ray": span(False)},
            "0.11.0": {"--model": span(), "--max-model-len": span(kind="int")},
        },
    )
    tr = translate("vllm", "vllm serve M --swap-space 8 --worker-use-ray", "vllm", source_version="0.6.3")
    out = outcomes(tr)
    assert out["--swap-space"].outcome == "lost" and "last in 0.6.3" in out["--swap-space"].detail
    assert out["--worker-use-ray"].outcome == "lost" and "last in 0.6.3" in out["--worker-use-ray"].detail
    kept = translate("vllm", "vllm serve M --worker-use-ray", "vllm", source_version="0.6.3", target_version="0.6.3")
    assert outcomes(kept)["--worker-use-ray"].outcome == "passed_through" and "--worker-use-ray" in kept.argv


def test_a_flag_the_source_version_refuses_is_lost_as_refused(no_release_data: dict[str, Any]) -> None:
    no_release_data["vllm"] = engine_data(
        "vllm",
        ParserRules(source="u.py"),
        {"0.8.5.post1": {"--model": span(), "--reasoning-parser": span(choices=["deepseek_r1", "granite"])}},
    )
    tr = translate("vllm", "vllm serve M --reasoning-parser qwen3", "sglang", source_version="0.8.5.post1")
    assert [f.input.typed for f in tr.refused] == ["--reasoning-parser"]
    assert outcomes(tr)["--reasoning-parser"].kind == "refused" and "--reasoning-parser" not in tr.argv


def test_parser_names_cross_engines_only_where_the_sources_map_them() -> None:
    tr = translate(
        "vllm",
        "vllm serve M --enable-auto-tool-choice --tool-call-parser hermes --reasoning-parser deepseek_r1",
        "sglang",
    )
    assert after(tr, "--tool-call-parser") == "hermes"  # SGLang's own hermes (qwen25 before 0.5.9)
    assert after(tr, "--reasoning-parser") == "deepseek-r1"
    assert outcomes(tr)["--enable-auto-tool-choice"].outcome == "default_matches"
    granite = translate("vllm", "vllm serve M --tool-call-parser granite", "sglang")
    item = outcomes(granite)["--tool-call-parser"]
    assert item.outcome == "lost" and "no source maps it" in item.detail
    back = translate("sglang", "python -m sglang.launch_server --model-path M --tool-call-parser qwen25", "vllm")
    assert after(back, "--tool-call-parser") == "hermes"


def test_tgi_sharded_uses_the_gpus_the_launch_sees() -> None:
    tr = translate("tgi", "CUDA_VISIBLE_DEVICES=0,1 text-generation-launcher --model-id M --sharded true", "vllm")
    assert after(tr, "--tensor-parallel-size") == "2" and tr.env["CUDA_VISIBLE_DEVICES"] == "0,1"
    blind = translate("tgi", "text-generation-launcher --model-id M --sharded true", "vllm")
    assert outcomes(blind)["--sharded"].outcome == "lost"


def test_tgi_lora_adapters_from_the_environment_become_sglang_lora_paths() -> None:
    tr = translate("tgi", "LORA_ADAPTERS=a/b,c/d text-generation-launcher --model-id M", "sglang")
    assert tr.argv[tr.argv.index("--lora-paths") + 1 :][:2] == ["a/b", "c/d"]
    back = translate("sglang", "python -m sglang.launch_server --model-path M --lora-paths a/b c/d", "tgi")
    assert after(back, "--lora-adapters") == "a/b,c/d"


def test_llamacpp_gpu_layers_need_the_model_to_say_all() -> None:
    card = card_from_config(C.LLAMA_8B)
    full = translate("llamacpp", "llama-server -m F.gguf -ngl 99", "vllm", card=card)
    assert outcomes(full)["-ngl"].outcome == "default_matches"
    partial = translate("llamacpp", "llama-server -m F.gguf -ngl 20", "vllm", card=card)
    assert outcomes(partial)["-ngl"].outcome == "lost" and "20 of 32" in outcomes(partial)["-ngl"].detail
    assert (
        outcomes(translate("llamacpp", "llama-server -m F.gguf -ngl all", "vllm"))["-ngl"].outcome == "default_matches"
    )


def test_library_env_passes_through_and_engine_env_does_not_cross() -> None:
    tr = translate("vllm", "HF_TOKEN=x VLLM_USE_V1=1 vllm serve M", "sglang")
    out = outcomes(tr)
    assert out["HF_TOKEN"].outcome == "passed_through" and tr.env["HF_TOKEN"] == "x"
    assert out["VLLM_USE_V1"].outcome == "lost" and "VLLM_USE_V1" not in tr.env


def test_memory_knob_is_converted_to_the_same_pool_with_model_and_gpu() -> None:
    from switchover.engines import load_profile
    from switchover.plan.equivalence import equivalent_memory_knob

    card = card_from_config(C.LLAMA_8B)
    for target in ("sglang", "trtllm", "tgi"):
        eq = equivalent_memory_knob(card, load_profile("vllm"), load_profile(target), 79.18, 0.9)
        assert eq is not None and eq.pool_gib == pytest.approx(eq.source_pool_gib, rel=0.01)
        tr = translate("vllm", "vllm serve m --gpu-memory-utilization 0.9", target, card=card, gpu_total_gib=79.18)
        spec = load_profile(target).flags["gpu_memory_fraction"]
        assert spec.flag is not None and after(tr, spec.flag) == str(eq.value)
        item = outcomes(tr)["--gpu-memory-utilization"]
        assert item.outcome == "translated" and "converted, not copied" in item.detail


def test_llamacpp_gets_as_many_slots_as_the_same_memory_holds() -> None:
    tr = translate(
        "vllm",
        "vllm serve m.gguf --gpu-memory-utilization 0.9 --max-model-len 8192 --max-num-seqs 128",
        "llamacpp",
        card=card_from_config(C.LLAMA_8B),
        gpu_total_gib=79.18,
    )
    slots = int(after(tr, "--parallel"))
    assert 40 < slots < 128  # ~51 GiB at 1 GiB per 8192-token slot
    assert int(after(tr, "--ctx-size")) == slots * 8192


@pytest.mark.parametrize(
    ("engine", "launch"),
    [
        ("sglang", "python3 -m sglang_router.launch_server --model-path /models/qwen --tp-size 2"),
        ("sglang", "sglang serve --model-path /models/qwen --tp-size 2"),
        ("vllm", "uv run --with vllm vllm serve /models/qwen --max-model-len 4096"),
        ("llamacpp", "/opt/llama.cpp/build/bin/llama-server -m /models/qwen.gguf --ctx-size 4096"),
        ("tgi", "text-generation-launcher --model-id /models/qwen --max-total-tokens 4096"),
        ("trtllm", "trtllm-serve serve /models/qwen --tp_size 2"),
    ],
)
def test_every_profile_spelling_of_the_command_is_recognised(engine: str, launch: str) -> None:
    intent = parse_launch(engine, launch)  # command words and model flags come from the engine profiles
    assert intent.model is not None and intent.model.startswith("/models/qwen")
    assert not intent.unknown, intent.unknown
