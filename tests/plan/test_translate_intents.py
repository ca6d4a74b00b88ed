"""translate, second pass: mechanisms found wanting on real launches (each test is a general rule read from an
engine's source at a release, with its link), proven on launches written for the test."""

from __future__ import annotations

import json
from typing import Any

import pytest

from switchover.engines.releases import EngineReleases, ParserRules
from switchover.plan.translate import translate
from tests.plan.records import after, outcomes
from tests.plan.release_data import engine_data, span

# no engine has release data unless a test adds it (conftest.no_release_data)
pytestmark = pytest.mark.usefixtures("no_release_data")

# ---- the model --------------------------------------------------------------------------------------------------


def test_llamacpp_long_model_flag_is_the_model_not_a_second_one() -> None:
    # llama.cpp common/arg.cpp: {"-m", "--model"} is one option
    # (https://github.com/ggml-org/llama.cpp/blob/b11434/common/arg.cpp#L3038)
    tr = translate("llamacpp", "llama-server --model /m/q4.gguf -c 4096", "llamacpp")
    assert "MODEL" not in " ".join(tr.argv) and tr.steps == []
    assert tr.argv.count("/m/q4.gguf") == 1 and outcomes(tr)["--model"].outcome == "translated"


LLAMACPP = {
    "--model": span(aliases=["-m"]),
    "--hf-repo": span(aliases=["-hf", "-hfr"]),
    "--ctx-size": span(kind="int", aliases=["-c"]),
    "--parallel": span(kind="int", aliases=["-np"]),
    "--kv-unified": span(False, kind="bool", aliases=["-kvu"], negation="--no-kv-unified"),
    "--cache-type-k": span(aliases=["-ctk"]),
    "--port": span(kind="int"),
    "--chat-template": span(),
    "--chat-template-file": span(),
    "--api-key": span(),
}


def test_a_launch_naming_no_model_gets_no_invented_one_for_the_same_engine(
    no_release_data: dict[str, EngineReleases],
) -> None:
    # llama-server -hf REPO downloads the GGUF itself (https://github.com/ggml-org/llama.cpp/blob/b11434/common/arg.cpp#L3063)
    no_release_data["llamacpp"] = engine_data("llamacpp", ParserRules(source="arg.cpp"), {"b11434": LLAMACPP})
    tr = translate("llamacpp", "llama-server -hf ggml-org/gpt-oss-20b-GGUF -c 4096", "llamacpp")
    assert "-m" not in tr.argv and "MODEL" not in " ".join(tr.argv) and tr.steps == []
    assert after(tr, "--hf-repo") == "ggml-org/gpt-oss-20b-GGUF"


# ---- KV cache -------------------------------------------------------------------------------------------------------


def test_a_kv_cache_type_the_target_spells_the_same_is_kept() -> None:
    # llama.cpp cache types include q5_0 (https://github.com/ggml-org/llama.cpp/blob/b11434/common/arg.cpp#L304)
    tr = translate("llamacpp", "llama-server -m m.gguf --cache-type-k q5_0", "llamacpp")
    assert after(tr, "--cache-type-k") == "q5_0" and outcomes(tr)["--cache-type-k"].outcome == "translated"
    lost = outcomes(translate("llamacpp", "llama-server -m m.gguf --cache-type-k q5_0", "vllm"))["--cache-type-k"]
    assert lost.outcome == "lost" and "q5_0" in (lost.detail or "")


def test_llamacpp_unified_kv_keeps_the_context_a_request_gets() -> None:
    # with --kv-unified every slot may use the whole -c; without it each gets -c / slots
    # (https://github.com/ggml-org/llama.cpp/blob/b11434/tools/server/README.md, --kv-unified)
    tr = translate("llamacpp", "llama-server -m m.gguf -c 120000 --parallel 3 --kv-unified", "llamacpp")
    assert after(tr, "--ctx-size") == "120000" and "--kv-unified" in tr.argv
    split = translate("llamacpp", "llama-server -m m.gguf -c 120000 --parallel 3", "llamacpp")
    assert after(split, "--ctx-size") == "120000"


# ---- intents carried between engines --------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("target", "words"),
    [
        (
            "sglang",
            ["--api-key", "k1"],
        ),  # https://github.com/sgl-project/sglang/blob/v0.5.5/python/sglang/srt/server_args.py#L2444
        (
            "tgi",
            ["--api-key", "k1"],
        ),  # https://github.com/huggingface/text-generation-inference/blob/v3.3.7/launcher/src/main.rs#L849
        ("llamacpp", ["--api-key", "k1"]),  # https://github.com/ggml-org/llama.cpp/blob/b11434/common/arg.cpp#L3502
    ],
)
def test_the_api_key_crosses_to_every_engine_that_has_one(target: str, words: list[str]) -> None:
    tr = translate("vllm", "vllm serve m --api-key k1", target)
    assert tr.argv[tr.argv.index(words[0]) :][:2] == words and outcomes(tr)["--api-key"].outcome == "translated"


def test_trtllm_serve_has_no_api_key_so_it_is_lost() -> None:
    item = outcomes(translate("vllm", "vllm serve m --api-key k1", "trtllm"))["--api-key"]
    assert item.outcome == "lost" and "k1" not in " ".join(item.rendered)


@pytest.mark.parametrize(
    ("source", "target", "words"),
    [
        ("vllm serve m --enforce-eager", "sglang", ["--disable-cuda-graph"]),
        ("vllm serve m --enforce-eager", "tgi", ["--cuda-graphs", "0"]),
        ("text-generation-launcher --model-id m --cuda-graphs 0", "vllm", ["--enforce-eager"]),
        ("python -m sglang.launch_server --model-path m --disable-cuda-graph", "vllm", ["--enforce-eager"]),
    ],
)
def test_running_without_cuda_graphs_is_one_intent(source: str, target: str, words: list[str]) -> None:
    # vLLM --enforce-eager (https://github.com/vllm-project/vllm/blob/v0.6.3/vllm/engine/arg_utils.py#L468), SGLang
    # --disable-cuda-graph (https://github.com/sgl-project/sglang/blob/v0.5.5/python/sglang/srt/server_args.py#L3176),
    # TGI --cuda-graphs 0 (https://github.com/huggingface/text-generation-inference/blob/v3.3.7/launcher/src/main.rs#L762-L766)
    engine = {"vllm": "vllm", "text": "tgi", "python": "sglang"}[source.split()[0].split("-")[0]]
    tr = translate(engine, source, target)
    assert tr.argv[tr.argv.index(words[0]) :][: len(words)] == words


def test_tgi_cuda_graph_sizes_mean_graphs_on_which_is_vllms_default() -> None:
    tr = translate("tgi", "text-generation-launcher --model-id m --cuda-graphs 1,2,4", "vllm")
    assert "--enforce-eager" not in tr.argv and outcomes(tr)["--cuda-graphs"].outcome in ("default_matches", "lost")


@pytest.mark.parametrize(
    ("source", "target", "flag", "value"),
    [
        ("vllm serve m --tool-call-parser hermes", "sglang", "--tool-call-parser", "hermes"),
        ("vllm serve m --tool-call-parser gemma4", "sglang", "--tool-call-parser", "gemma4"),
        ("vllm serve m --reasoning-parser gemma4", "sglang", "--reasoning-parser", "gemma4"),
        (
            "python -m sglang.launch_server --model-path m --reasoning-parser deepseek-v3",
            "vllm",
            "--reasoning-parser",
            "deepseek_v3",
        ),
        (
            "python -m sglang.launch_server --model-path m --reasoning-parser kimi_k2",
            "vllm",
            "--reasoning-parser",
            "kimi_k2",
        ),
    ],
)
def test_parser_names_cross_where_both_sources_register_the_format(
    source: str, target: str, flag: str, value: str
) -> None:
    engine = "vllm" if source.startswith("vllm") else "sglang"
    tr = translate(engine, source, target)
    assert after(tr, flag) == value


def test_a_parser_name_the_target_release_lacks_falls_back_to_one_it_has(
    no_release_data: dict[str, EngineReleases],
) -> None:
    # SGLang registers `hermes` only from 0.5.9; before that qwen25 reads the same <tool_call> JSON format
    # (https://github.com/sgl-project/sglang/blob/v0.5.5/python/sglang/srt/function_call/qwen25_detector.py)
    no_release_data["sglang"] = engine_data(
        "sglang",
        ParserRules(abbrev=True, source="server_args.py"),
        {
            "0.5.5": {"--model-path": span(), "--tool-call-parser": span(choices=["qwen25", "mistral", "llama3"])},
            "0.5.9": {"--model-path": span(), "--tool-call-parser": span(choices=["qwen25", "hermes", "llama3"])},
        },
    )
    assert (
        after(
            translate("vllm", "vllm serve m --tool-call-parser hermes", "sglang", target_version="0.5.5"),
            "--tool-call-parser",
        )
        == "qwen25"
    )
    assert (
        after(
            translate("vllm", "vllm serve m --tool-call-parser hermes", "sglang", target_version="0.5.9"),
            "--tool-call-parser",
        )
        == "hermes"
    )


def test_trtllm_takes_the_model_dtype_in_its_yaml() -> None:
    # LlmArgs.dtype (https://github.com/NVIDIA/TensorRT-LLM/blob/v1.3.0rc3/tensorrt_llm/llmapi/llm_args.py)
    tr = translate("vllm", "vllm serve m --dtype half", "trtllm")
    assert tr.yaml_config is not None and tr.yaml_config["dtype"] == "float16"


def test_a_chat_template_file_goes_to_llamacpps_file_flag_and_back() -> None:
    # vLLM --chat-template reads a file unless the value holds template text
    # (https://github.com/vllm-project/vllm/blob/v0.6.3/vllm/entrypoints/chat_utils.py); llama.cpp reads a file with
    # --chat-template-file, a name or the text with --chat-template
    # (https://github.com/ggml-org/llama.cpp/blob/b11434/common/arg.cpp#L3760-L3784)
    tr = translate("vllm", "vllm serve m --chat-template /t/tool.jinja", "llamacpp")
    assert after(tr, "--chat-template-file") == "/t/tool.jinja" and "--chat-template" not in tr.argv
    back = translate("llamacpp", "llama-server -m m.gguf --chat-template-file laguna.jinja", "vllm")
    assert after(back, "--chat-template") == "laguna.jinja"
    sg = translate("llamacpp", "llama-server -m m.gguf --chat-template-file laguna.jinja", "sglang")
    assert after(sg, "--chat-template") == "laguna.jinja"


def test_a_built_in_template_name_stays_with_its_engine() -> None:
    item = outcomes(translate("llamacpp", "llama-server -m m.gguf --chat-template chatml", "vllm"))["--chat-template"]
    assert item.outcome == "lost" and "chatml" in (item.detail or "")
    same = translate("llamacpp", "llama-server -m m.gguf --chat-template chatml", "llamacpp")
    assert after(same, "--chat-template") == "chatml"


def test_vllm_multimodal_limits_change_from_pairs_to_json_by_release() -> None:
    # KEY=VALUE pairs (nullable_kvs, https://github.com/vllm-project/vllm/blob/v0.8.2/vllm/engine/arg_utils.py#L55)
    # until 0.8.5 parses the option as JSON (https://github.com/vllm-project/vllm/blob/v0.8.5/vllm/engine/arg_utils.py)
    tr = translate(
        "vllm",
        "vllm serve m --limit-mm-per-prompt image=5,video=5",
        "vllm",
        source_version="0.8.2",
        target_version="0.9.0",
    )
    assert json.loads(after(tr, "--limit-mm-per-prompt")) == {"image": 5, "video": 5}
    old = translate(
        "vllm",
        "vllm serve m --limit-mm-per-prompt '{\"image\": 2}'",
        "vllm",
        source_version="0.9.0",
        target_version="0.8.2",
    )
    assert after(old, "--limit-mm-per-prompt") == "image=2"


def test_vllm_rope_scaling_moves_into_hf_overrides_after_its_removal() -> None:
    # 0.11.0 warns that --rope-scaling goes and names --hf-overrides '{"rope_scaling": ...}' instead
    # (https://github.com/vllm-project/vllm/blob/v0.11.0/vllm/config/model.py#L398-L405); 0.11.1 has no --rope-scaling
    tr = translate(
        "vllm",
        'vllm serve m --rope-scaling \'{"rope_type":"yarn","factor":4.0}\'',
        "vllm",
        source_version="0.8.4",
        target_version="0.12.0",
    )
    assert "--rope-scaling" not in tr.argv
    assert json.loads(after(tr, "--hf-overrides")) == {"rope_scaling": {"rope_type": "yarn", "factor": 4.0}}


def test_tgi_lora_adapter_ids_become_named_vllm_lora_modules() -> None:
    # vLLM --lora-modules takes NAME=PATH (or JSON) per item
    # (https://github.com/vllm-project/vllm/blob/v0.34.0/vllm/entrypoints/common/cli_args.py#L55); TGI selects an
    # adapter by its id, so the id stays its name
    tr = translate("tgi", "text-generation-launcher --model-id m --lora-adapters=org/a,org/b", "vllm")
    i = tr.argv.index("--lora-modules")
    assert tr.argv[i + 1 : i + 3] == ["org/a=org/a", "org/b=org/b"]
    sg = translate("tgi", "text-generation-launcher --model-id m --lora-adapters=org/a,org/b", "sglang")
    i = sg.argv.index("--lora-paths")
    assert sg.argv[i + 1 : i + 3] == ["org/a", "org/b"]


# ---- config files: one record per top-level key ------------------------------------------------------------------

TRTLLM_YAML = """kv_cache_config:
  dtype: fp8
  enable_partial_reuse: false
cuda_graph_config:
  enable_padding: true
  max_batch_size: 64
speculative_config:
  decoding_type: MTP
  num_nextn_predict_layers: 2
enable_attention_dp: true
"""


def test_every_top_level_key_of_a_config_file_is_one_record() -> None:
    tr = translate(
        "trtllm", "trtllm-serve /m --tp_size 8 --extra_llm_api_options x.yaml", "vllm", files={"x.yaml": TRTLLM_YAML}
    )
    config = [f.input.typed for f in tr.flags if f.input.via == "config"]
    assert config == ["kv_cache_config", "cuda_graph_config", "speculative_config", "enable_attention_dp"]
    out = outcomes(tr)
    assert out["kv_cache_config"].outcome == "translated" and "enable_partial_reuse" in (
        out["kv_cache_config"].detail or ""
    )
    assert out["cuda_graph_config"].outcome == "lost"


def test_a_same_engine_upgrade_keeps_a_config_files_other_keys() -> None:
    tr = translate("trtllm", "trtllm-serve /m --extra_llm_api_options x.yaml", "trtllm", files={"x.yaml": TRTLLM_YAML})
    assert tr.yaml_config is not None
    assert tr.yaml_config["kv_cache_config"] == {"dtype": "fp8", "enable_partial_reuse": False}
    assert tr.yaml_config["cuda_graph_config"] == {"enable_padding": True, "max_batch_size": 64}
    assert tr.yaml_config["speculative_config"] == {"decoding_type": "MTP", "num_nextn_predict_layers": 2}
    assert outcomes(tr)["cuda_graph_config"].outcome == "passed_through"


def test_an_inline_json_options_value_is_read_as_the_file_it_stands_for() -> None:
    tr = translate(
        "trtllm",
        'trtllm-serve /m --extra_llm_api_options \'{"speculative_config": {"decoding_type": '
        '"Eagle3", "max_draft_len": 3, "speculative_model_dir": "org/eagle3"}, '
        '"guided_decoding_backend": "xgrammar"}\'',
        "trtllm",
    )
    assert [f.input.typed for f in tr.flags if f.input.via == "config"] == [
        "speculative_config",
        "guided_decoding_backend",
    ]


def test_without_release_data_trtllm_serve_says_its_flags_are_not_checked() -> None:
    tr = translate("trtllm", "trtllm-serve /m --tp_size 8", "vllm")
    assert "not checked against a release: no trtllm-serve release data" in (
        outcomes(tr)["--tp_size"].input.validity_detail or ""
    )


def test_trtllm_serve_is_rendered_with_its_short_option_names() -> None:
    # click options --tp_size, --pp_size, --ep_size, --kv_cache_free_gpu_memory_fraction
    # (https://github.com/NVIDIA/TensorRT-LLM/blob/4c05a74891e4df8066f08ed4ce14b0972abe4e25/tensorrt_llm/commands/serve.py)
    tr = translate("vllm", "vllm serve m -tp 4 -pp 2", "trtllm")
    assert after(tr, "--tp_size") == "4" and after(tr, "--pp_size") == "2"
    assert "--tensor_parallel_size" not in tr.argv


# ---- speculative decoding across engines --------------------------------------------------------------------------


def test_trtllm_mtp_modules_are_vllm_mtp_tokens() -> None:
    # N MTP modules draft N tokens (TRT-LLM MTPDecodingConfig.num_nextn_predict_layers,
    # https://github.com/NVIDIA/TensorRT-LLM/blob/v1.3.0rc3/tensorrt_llm/llmapi/llm_args.py)
    tr = translate("trtllm", "trtllm-serve /m --extra_llm_api_options x.yaml", "vllm", files={"x.yaml": TRTLLM_YAML})
    assert json.loads(after(tr, "--speculative-config")) == {"method": "mtp", "num_speculative_tokens": 2}


def test_trtllm_eagle3_becomes_vllm_and_sglang_eagle3_with_its_draft() -> None:
    text = (
        'trtllm-serve /m --extra_llm_api_options \'{"speculative_config": {"decoding_type": "Eagle3", '
        '"max_draft_len": 3, "speculative_model_dir": "org/eagle3", "eagle3_model_arch": "llama3"}}\''
    )
    vl = translate("trtllm", text, "vllm")
    assert json.loads(after(vl, "--speculative-config")) == {
        "method": "eagle3",
        "model": "org/eagle3",
        "num_speculative_tokens": 3,
    }
    assert "eagle3_model_arch" in (outcomes(vl)["speculative_config"].detail or "")  # said, not carried
    sg = translate("trtllm", text, "sglang")
    # SGLang drafts a chain of k steps with topk 1 and k+1 draft tokens
    # (https://github.com/sgl-project/sglang/blob/v0.5.5/python/sglang/srt/server_args.py#L1598-L1604)
    assert (after(sg, "--speculative-algorithm"), after(sg, "--speculative-draft-model-path")) == (
        "EAGLE3",
        "org/eagle3",
    )
    assert (
        after(sg, "--speculative-num-steps"),
        after(sg, "--speculative-eagle-topk"),
        after(sg, "--speculative-num-draft-tokens"),
    ) == ("3", "1", "4")


def test_vllm_prompt_lookup_is_sglang_ngram() -> None:
    new = translate(
        "vllm",
        'vllm serve m --speculative-config \'{"method": "ngram", "num_speculative_tokens": 5, '
        '"prompt_lookup_max": 4}\'',
        "sglang",
        source_version="0.9.0",
    )
    assert after(new, "--speculative-algorithm") == "NGRAM"
    # before 0.8.3 prompt lookup is the draft model "[ngram]"
    # (https://github.com/vllm-project/vllm/blob/v0.6.3/vllm/engine/arg_utils.py#L632)
    old = translate(
        "vllm", "vllm serve m --speculative-model [ngram] --num-speculative-tokens 5", "sglang", source_version="0.6.3"
    )
    assert after(old, "--speculative-algorithm") == "NGRAM" and "--speculative-draft-model-path" not in old.argv


def test_a_vllm_draft_model_without_a_method_says_sglang_needs_one() -> None:
    # vLLM detects the method from the draft checkpoint when none is given
    # (https://github.com/vllm-project/vllm/blob/v0.34.0/vllm/config/speculative.py)
    tr = translate(
        "vllm", "vllm serve m --speculative-model d --num-speculative-tokens 4", "sglang", source_version="0.6.3"
    )
    assert after(tr, "--speculative-draft-model-path") == "d"
    assert "--speculative-algorithm" in (outcomes(tr)["--speculative-model"].detail or "")


def test_sglang_eagle_becomes_a_vllm_speculative_config() -> None:
    tr = translate(
        "sglang",
        "python -m sglang.launch_server --model-path m --speculative-algorithm EAGLE "
        "--speculative-draft-model-path d --speculative-num-steps 3 --speculative-eagle-topk 1 "
        "--speculative-num-draft-tokens 4",
        "vllm",
    )
    assert json.loads(after(tr, "--speculative-config")) == {
        "method": "eagle",
        "model": "d",
        "num_speculative_tokens": 3,
    }
    assert outcomes(tr)["--speculative-eagle-topk"].outcome == "default_matches"


# ---- memory --------------------------------------------------------------------------------------------------------


def test_the_memory_knob_is_converted_with_each_sides_release_gpu_and_context(monkeypatch: pytest.MonkeyPatch) -> None:
    from switchover.model import card_from_config
    from switchover.plan import translate_values
    from tests.plan import configs as C

    seen: dict[str, Any] = {}

    def spy(*args: Any, **kwargs: Any) -> None:
        seen.update(kwargs)
        return None

    monkeypatch.setattr(translate_values, "equivalent_memory_knob", spy)
    translate(
        "vllm",
        "vllm serve m --gpu-memory-utilization 0.9 --max-model-len 8192",
        "sglang",
        card=card_from_config(C.LLAMA_8B),
        gpu_total_gib=79.18,
        gpu_name="H100-80G",
        source_version="0.6.3",
        target_version="0.5.5",
    )
    assert (seen["src_version"], seen["dst_version"], seen["max_model_len"], seen["gpu_name"]) == (
        "0.6.3",
        "0.5.5",
        8192,
        "H100-80G",
    )


def test_vllm_task_becomes_runner_after_its_removal() -> None:
    # --task is deprecated in 0.12.0 ("removed in v0.13.0"): a pooling task is --runner pooling, plus --convert for a
    # checkpoint that is not a pooling model (https://github.com/vllm-project/vllm/blob/v0.12.0/vllm/config/model.py#L538-L605)
    tr = translate("vllm", "vllm serve m --task embedding", "vllm", source_version="0.6.4", target_version="0.13.0")
    assert after(tr, "--runner") == "pooling" and "--task" not in tr.argv
    assert "--convert embed" in (outcomes(tr)["--task"].detail or "")
    same = translate("vllm", "vllm serve m --task embed", "vllm", source_version="0.8.5", target_version="0.9.0")
    assert after(same, "--task") == "embed"


def test_vllm_dotted_keys_set_keys_of_one_json_option(no_release_data: dict[str, EngineReleases]) -> None:
    # FlexibleArgumentParser: --json-option.key VALUE sets that key, values read as JSON
    # (https://github.com/vllm-project/vllm/blob/v0.34.0/vllm/utils/argparse_utils.py#L476-L488)
    no_release_data["vllm"] = engine_data(
        "vllm",
        ParserRules(abbrev=True, underscores=True, dotted_keys=True, source="argparse_utils.py"),
        {
            "0.34.0": {
                "--model": span(),
                "--speculative-config": span(kind="json"),
                "--compilation-config": span(kind="json"),
            }
        },
    )
    tr = translate(
        "vllm",
        "vllm serve m --speculative-config.method ngram "
        "--speculative-config.num_speculative_tokens 4 --compilation-config.level 3",
        "vllm",
    )
    assert json.loads(after(tr, "--speculative-config")) == {"method": "ngram", "num_speculative_tokens": 4}
    assert after(tr, "--compilation-config.level") == "3"  # kept dotted: the target reads it the same way
    assert all(f.input.validity == "ok" for f in tr.flags)


def test_sglang_attention_dp_is_no_vllm_data_parallel_replicas() -> None:
    # --enable-dp-attention: "data parallelism for attention and tensor parallelism for FFN. The dp size should be
    # equal to the tp size" (https://github.com/sgl-project/sglang/blob/v0.5.5/python/sglang/srt/server_args.py#L3251)
    text = "python -m sglang.launch_server --model-path m --tp-size 8 --dp-size 8 --enable-dp-attention"
    vl = translate("sglang", text, "vllm")
    assert after(vl, "--tensor-parallel-size") == "8" and "--data-parallel-size" not in vl.argv
    assert outcomes(vl)["--dp-size"].outcome == "lost"
    trt = translate("sglang", text, "trtllm")
    assert trt.yaml_config is not None and trt.yaml_config["enable_attention_dp"] is True
    assert outcomes(trt)["--dp-size"].outcome == "default_matches"


def test_a_switch_that_takes_a_word_in_the_target_release_gets_its_on_word(
    no_release_data: dict[str, EngineReleases],
) -> None:
    # llama.cpp --flash-attn: a switch at b4621, [on|off|auto] at b11434
    # (https://github.com/ggml-org/llama.cpp/blob/b11434/common/arg.cpp)
    no_release_data["llamacpp"] = engine_data(
        "llamacpp",
        ParserRules(source="arg.cpp"),
        {
            "b4621": {**LLAMACPP, "--flash-attn": span(False, kind="bool", aliases=["-fa"])},
            "b11434": {**LLAMACPP, "--flash-attn": span(kind="str", aliases=["-fa"], choices=["on", "off", "auto"])},
        },
    )
    tr = translate(
        "llamacpp", "llama-server -m m.gguf -fa", "llamacpp", source_version="b4621", target_version="b11434"
    )
    assert after(tr, "--flash-attn") == "on"
    back = translate(
        "llamacpp", "llama-server -m m.gguf -fa on", "llamacpp", source_version="b11434", target_version="b4621"
    )
    assert "--flash-attn" in back.argv and back.argv[back.argv.index("--flash-attn") + 1 :][:1] != ["on"]
