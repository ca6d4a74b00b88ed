"""plan.launch: launches read the way the engine's own parser reads them at a version, one record per input flag,
against synthetic release data (engines.extract.compact) so each rule is proven on its own."""

from __future__ import annotations

from typing import Any

import pytest

from switchover.engines import releases
from switchover.engines.extract import Extracted
from switchover.engines.releases import EngineReleases, ParserRules
from switchover.errors import BadInput
from switchover.plan.launch import detect_engine, parse_launch
from tests.plan.records import by_typed
from tests.plan.release_data import engine_data, releases_of, span

ARGPARSE = ParserRules(abbrev=True, source="launch_server.py")
FLEXIBLE = ParserRules(abbrev=True, underscores=True, source="vllm/utils.py")
CLAP = ParserRules(source="launcher/src/main.rs")


VLLM_OLD = {
    "--model": span(),
    "--max-num-seqs": span(kind="int"),
    "--enforce-eager": span(False, kind="bool"),
    "--tensor-parallel-size": span(kind="int", aliases=["-tp"]),
    "--swap-space": span(kind="float"),
    "--reasoning-parser": span(choices=["deepseek_r1", "granite"]),
    "--config": span(),
    "--enable-prefix-caching": span(False, kind="bool", negation="--no-enable-prefix-caching"),
    "--max-model-len": span(kind="int"),
    "--speculative-config": span(kind="json"),
}
VLLM_NEW = {k: v for k, v in VLLM_OLD.items() if k != "--swap-space"}
SGLANG = {
    "--model-path": span(),
    "--tp-size": span(kind="int", aliases=["--tensor-parallel-size"]),
    "--dp-size": span(kind="int"),
    "--mem-fraction-static": span(kind="float"),
    "--ep-size": span(kind="int"),
    "--dtype": span(),
}
TGI_OLD = {
    "--model-id": span(env="MODEL_ID"),
    "--quantize": span(env="QUANTIZE", choices=["awq", "gptq"]),
    "--sharded": span(env="SHARDED", kind="bool", choices=["true", "false"]),
    "--trust-remote-code": span(False, env="TRUST_REMOTE_CODE", kind="bool"),
}
TGI_NEW = {**TGI_OLD, "--lora-adapters": span(env="LORA_ADAPTERS")}


@pytest.fixture(autouse=True)
def release_data(no_release_data: dict[str, EngineReleases]) -> None:
    no_release_data.update(
        {
            "vllm": engine_data("vllm", FLEXIBLE, {"0.8.5.post1": VLLM_OLD, "0.11.0": VLLM_NEW}),
            "sglang": engine_data("sglang", ARGPARSE, {"0.4.0": SGLANG}),
            "tgi": engine_data("tgi", CLAP, {"2.0.4": TGI_OLD, "2.1.0": TGI_NEW}),
        }
    )


def test_underscores_are_read_as_dashes_where_the_parser_does() -> None:
    launch = parse_launch("vllm", "vllm serve M --max_num_seqs 8 --enforce_eager", version="0.8.5.post1")
    rec = by_typed(launch)
    assert rec["--max_num_seqs"].option == "--max-num-seqs" and rec["--max_num_seqs"].validity == "ok"
    assert launch.values["max_concurrent_sequences"] == 8 and launch.values["enforce_eager"] is True


def test_argparse_abbreviations_select_the_option_sglang_tp_8() -> None:
    launch = parse_launch(
        "sglang", "python3 -m sglang.launch_server --model-path M --tp 8 --mem-frac 0.8 --dp 2", version="0.4.0"
    )
    rec = by_typed(launch)
    assert rec["--tp"].option == "--tp-size" and rec["--tp"].intent == "tensor_parallel_size"
    assert launch.values["tensor_parallel_size"] == 8 and launch.values["data_parallel_size"] == 2
    assert launch.values["gpu_memory_fraction"] == 0.8 and launch.model == "M"


def test_an_option_the_version_lacks_is_refused_with_where_it_was_last() -> None:
    rec = by_typed(parse_launch("vllm", "vllm serve M --swap-space 4", version="0.11.0"))["--swap-space"]
    assert rec.validity == "refused"
    assert (
        "last in 0.8.5.post1" in rec.validity_detail and "https://example.invalid/v0.8.5.post1/" in rec.validity_detail
    )


def test_a_value_outside_the_choices_is_refused_reasoning_parser_qwen3_at_0_8_5() -> None:
    launch = parse_launch("vllm", "vllm serve M --reasoning-parser qwen3", version="0.8.5.post1")
    rec = by_typed(launch)["--reasoning-parser"]
    assert rec.validity == "refused" and "not a choice" in rec.validity_detail and "deepseek_r1" in rec.validity_detail
    assert "reasoning_parser" not in launch.values  # a refused value sets nothing


def test_a_value_given_to_a_switch_is_refused_enforce_eager_true() -> None:
    launch = parse_launch("vllm", "vllm serve M --enforce_eager true --max-model-len 100", version="0.8.5.post1")
    rec = by_typed(launch)["--enforce_eager"]
    assert rec.validity == "refused" and rec.value == "true" and "takes no value" in rec.validity_detail
    assert launch.values["max_context_length"] == 100  # the word was consumed with the switch


def test_negations_and_negative_numbers() -> None:
    launch = parse_launch("vllm", "vllm serve M --no-enable-prefix-caching", version="0.11.0")
    assert launch.values["prefix_caching"] is False
    cpp = parse_launch("llamacpp", "llama-server -m F.gguf --cache-ram -1 -c 0 -np 4")
    rec = by_typed(cpp)
    assert rec["--cache-ram"].value == "-1" and "-1" not in rec  # a value, not a flag
    assert cpp.values["max_context_length"] == "model"  # -c 0: the model's own context


def test_json_values_with_colons_parse_as_a_command() -> None:
    launch = parse_launch(
        "vllm",
        """X=1 vllm serve M --speculative-config '{"model": "d", "num_speculative_tokens": 5,
                          "method": "eagle"}'""",
        version="0.11.0",
    )
    assert launch.env == {"X": "1"}
    assert launch.values["speculative_model"] == "d" and launch.values["speculative_tokens"] == 5
    assert launch.values["speculative_method"] == "eagle"


def test_versions_are_said_newest_assumed_and_outside_the_data() -> None:
    newest = parse_launch("vllm", "vllm serve M --max-num-seqs 4")
    assert newest.version == "0.11.0" and "newest read, 0.11.0, is assumed" in (newest.version_note or "")
    old = parse_launch("vllm", "vllm serve M --max-num-seqs 4", version="0.4.0")
    assert "older than the oldest release read" in (old.version_note or "")
    assert by_typed(old)["--max-num-seqs"].validity == "unknown"
    none = parse_launch("trtllm", "trtllm-serve /m --tp_size 2")
    assert (none.version_note or "").startswith("no trtllm-serve release data: flags not checked against a release")
    assert all(
        x.validity == "unknown" and "no trtllm-serve release data" in (x.validity_detail or "") for x in none.inputs
    )


def test_tgi_arguments_given_as_env_vars_are_records() -> None:
    launch = parse_launch(
        "tgi",
        "QUANTIZE=awq LORA_ADAPTERS=a/b,c/d CUDA_VISIBLE_DEVICES=0,1 HF_TOKEN=x text-generation-launcher --model-id M",
        version="2.0.4",
    )
    rec = by_typed(launch)
    assert rec["QUANTIZE"].option == "--quantize" and rec["QUANTIZE"].via == "env" and rec["QUANTIZE"].validity == "ok"
    assert launch.values["quantization"] == "awq"
    assert rec["LORA_ADAPTERS"].validity == "refused" and "2.1.0" in rec["LORA_ADAPTERS"].validity_detail
    assert rec["CUDA_VISIBLE_DEVICES"].intent == "visible_devices" and launch.gpu_count == 2
    assert rec["HF_TOKEN"].intent is None and rec["HF_TOKEN"].validity == "unknown"
    later = parse_launch("tgi", "LORA_ADAPTERS=a/b,c/d text-generation-launcher --model-id M", version="2.1.0")
    assert later.values["lora_adapters"] == ["a/b", "c/d"]


def test_tgi_sharded_takes_a_value_and_a_clap_switch_does_not() -> None:
    launch = parse_launch(
        "tgi", "text-generation-launcher --model-id M --sharded true --trust-remote-code true", version="2.0.4"
    )
    rec = by_typed(launch)
    assert rec["--sharded"].validity == "ok" and launch.values["sharded"] is True
    assert rec["--trust-remote-code"].validity == "refused"


def test_docker_image_names_engine_and_version() -> None:
    launch = parse_launch(
        "tgi", "docker run --gpus 2 ghcr.io/huggingface/text-generation-inference:2.1.0 --model-id M --quantize gptq"
    )
    assert launch.version == "2.1.0" and any("image tag" in n for n in launch.notes)
    assert launch.gpu_count == 2 and launch.model == "M"
    assert detect_engine("docker run lmsysorg/sglang:v0.4.0 python3 -m sglang.launch_server --model-path M") == (
        "sglang",
        "0.4.0",
    )
    with pytest.raises(BadInput, match="runs vllm, not tgi"):
        parse_launch("tgi", "docker run vllm/vllm-openai:v0.11.0 --model M")
    with pytest.raises(BadInput, match="runs sglang, not vllm"):
        parse_launch("vllm", "python -m sglang.launch_server --model-path M")


def test_kubernetes_args_list_is_a_launch() -> None:
    text = """
apiVersion: apps/v1
kind: Deployment
spec:
  template:
    spec:
      containers:
      - name: server
        image: vllm/vllm-openai:v0.11.0
        args: ["--model", "M", "--max_num_seqs=16", "--tensor-parallel-size", "2"]
        env:
        - {name: CUDA_VISIBLE_DEVICES, value: "0,1"}
"""
    launch = parse_launch("vllm", text)
    assert launch.version == "0.11.0" and launch.model == "M"
    assert launch.values == {"max_concurrent_sequences": 16, "tensor_parallel_size": 2}
    assert launch.gpu_count == 2


def test_config_files_are_read_and_the_command_line_wins_in_vllm() -> None:
    launch = parse_launch(
        "vllm",
        "vllm serve M --max-model-len 4096 --config c.yaml",
        version="0.11.0",
        files={"c.yaml": "max_model_len: 8192\nmax-num-seqs: 64\nenable_prefix_caching: false\n"},
    )
    rec = by_typed(launch)
    assert rec["--config"].intent == "config_file" and rec["max-num-seqs"].via == "config"
    assert launch.values["max_context_length"] == 4096 and launch.values["max_concurrent_sequences"] == 64
    assert launch.values["prefix_caching"] is False
    missing = parse_launch("vllm", "vllm serve M --config /nope.yaml", version="0.11.0")
    assert any("not given" in n for n in missing.notes)


def test_trtllm_options_file_wins_and_a_heredoc_supplies_it() -> None:
    script = """cat > /tmp/x.yml << EOF
kv_cache_config:
  free_gpu_memory_fraction: 0.8
  enable_block_reuse: false
max_batch_size: 32
cuda_graph_config:
  enable_padding: true
EOF
trtllm-serve /m --max_batch_size 64 --extra_llm_api_options /tmp/x.yml"""
    launch = parse_launch("trtllm", script)
    assert launch.values["max_concurrent_sequences"] == 32  # the YAML wins, as in trtllm-serve
    assert launch.values["gpu_memory_fraction"] == 0.8 and launch.values["prefix_caching"] is False
    rec = by_typed(launch)
    assert rec["cuda_graph_config"].via == "config"  # one record per top-level key, even with no intent


def test_a_pasted_yaml_of_settings_is_read() -> None:
    launch = parse_launch("vllm", "model: /m\ntensor_parallel_size: 4\nmax-model-len: 4096\n", version="0.11.0")
    assert launch.model == "/m" and launch.values == {"tensor_parallel_size": 4, "max_context_length": 4096}


def test_stray_words_are_refused_and_a_missing_value_too() -> None:
    launch = parse_launch("sglang", "python -m sglang.launch_server --model-path M oops --tp-size", version="0.4.0")
    rec = by_typed(launch)
    assert rec["oops"].validity == "refused" and rec["--tp-size"].validity == "refused"
    assert "needs a value" in rec["--tp-size"].validity_detail
    bare = by_typed(parse_launch("sglang", "python -m sglang.launch_server --model-path M --dtype", version="0.4.0"))
    # argparse's optional values (nargs='?') are in the release data (FlagSpan.value_optional): --dtype has none
    assert bare["--dtype"].validity == "refused"


@pytest.mark.parametrize(("text", "match"), [("   ", "empty"), ("echo hi", "no engine launch")])
def test_bad_launches_are_bad_input(text: str, match: str) -> None:
    with pytest.raises(BadInput, match=match):
        parse_launch("vllm", text, version="0.11.0")


@pytest.mark.parametrize(
    ("text", "typed", "match"),
    [
        ("python -m sglang.launch_server --model-path M --port port", "--port", "'port'"),
        ("python -m sglang.launch_server --model-path M --mem-fraction-static half", "--mem-fraction-static", "half"),
    ],
)
def test_a_value_of_the_wrong_kind_is_that_flags_refusal_not_bad_input(text: str, typed: str, match: str) -> None:
    # a poster's placeholder (`--port port`): the engine's parser refuses it, the launch is invalid, the run goes on
    launch = parse_launch("sglang", text, version="0.3.0")  # a release the data does not cover: kinds from the profile
    rec = by_typed(launch)[typed]
    assert rec.validity == "refused" and match in (rec.validity_detail or "")
    assert rec.intent not in launch.values


def test_a_number_no_engine_can_mean_is_still_bad_input() -> None:
    # outside what the setting can mean at all (RANGES): a typo, exit 2 (issue 11)
    with pytest.raises(BadInput, match="must be at least 1"):
        parse_launch(
            "sglang", "python -m sglang.launch_server --model-path M --max-running-requests 0", version="0.3.0"
        )


@pytest.mark.parametrize(
    "text", ["llama-server.exe -m E:\\m.gguf --port 8084", ".\\llama-server.exe -m 'E:\\m.gguf' --port 8084"]
)
def test_a_windows_llama_server_exe_is_llamacpp(text: str) -> None:
    assert detect_engine(text) == ("llamacpp", None)
    launch = parse_launch("llamacpp", text)
    assert launch.model == "E:\\m.gguf" and launch.values["port"] == 8084


def _env_data(environment: dict[str, dict[str, Any]]) -> EngineReleases:
    return releases_of(
        "vllm",
        {
            v: Extracted(parser=FLEXIBLE, flags={"--model": span()}, files=["args.py"], environment=env)
            for v, env in environment.items()
        },
    )


def test_an_engine_environment_variable_is_checked_where_the_data_has_the_engines_table(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    data = _env_data({"0.8.5": {"VLLM_USE_V1": {"path": "vllm/envs.py"}}, "0.11.0": {}})
    monkeypatch.setattr(releases, "load_releases", lambda engine: data if engine == "vllm" else None)
    ok = by_typed(parse_launch("vllm", "VLLM_USE_V1=0 vllm serve M", version="0.8.5"))["VLLM_USE_V1"]
    assert ok.validity == "ok"
    gone = by_typed(parse_launch("vllm", "VLLM_USE_V1=0 vllm serve M", version="0.11.0"))["VLLM_USE_V1"]
    assert gone.validity == "refused" and "last in 0.8.5" in (gone.validity_detail or "")


def test_without_an_environment_table_the_variable_is_said_not_checked() -> None:
    rec = by_typed(parse_launch("vllm", "VLLM_USE_V1=0 vllm serve M", version="0.11.0"))["VLLM_USE_V1"]
    assert rec.validity == "unknown" and "no environment-variable data for vllm" in (rec.validity_detail or "")


def test_a_value_both_definitions_around_an_unread_release_accept_is_ok(monkeypatch: pytest.MonkeyPatch) -> None:
    # between two reads that define --split-mode differently, a value both accept is surely accepted; one only the
    # later read accepts is unknown there (engines.releases Lookup.alternatives)
    data = releases_of(
        "llamacpp",
        {
            v: Extracted(
                parser=CLAP, files=["arg.cpp"], flags={"--split-mode": span(choices=c), "--model": span(aliases=["-m"])}
            )
            for v, c in (("b8390", ["none", "layer", "row"]), ("b9093", ["none", "layer", "row", "tensor"]))
        },
        tag="",
    )
    monkeypatch.setattr(releases, "load_releases", lambda engine: data if engine == "llamacpp" else None)
    both = by_typed(parse_launch("llamacpp", "llama-server -m m.gguf --split-mode layer", version="b8637"))
    assert both["--split-mode"].validity == "ok"
    one = by_typed(parse_launch("llamacpp", "llama-server -m m.gguf --split-mode tensor", version="b8637"))
    assert one["--split-mode"].validity == "unknown" and "b8390" in (one["--split-mode"].validity_detail or "")


def test_a_bare_option_whose_value_is_optional_is_ok(monkeypatch: pytest.MonkeyPatch) -> None:
    # argparse nargs='?' (vLLM --enable-chunked-prefill at 0.6.0: https://github.com/vllm-project/vllm/blob/v0.6.0/vllm/engine/arg_utils.py)
    data = engine_data(
        "vllm",
        FLEXIBLE,
        {
            "0.6.0": {
                "--model": span(),
                "--enable-chunked-prefill": span(kind="bool", value_optional=True, choices=["true", "false"]),
            }
        },
    )
    monkeypatch.setattr(releases, "load_releases", lambda engine: data if engine == "vllm" else None)
    rec = by_typed(parse_launch("vllm", "vllm serve M --enable-chunked-prefill", version="0.6.0"))
    assert rec["--enable-chunked-prefill"].validity == "ok"


def test_a_library_variable_the_engine_itself_reads_is_checked_in_its_table(monkeypatch: pytest.MonkeyPatch) -> None:
    data = _env_data({"0.8.5": {"HF_TOKEN": {"path": "vllm/envs.py"}}})
    monkeypatch.setattr(releases, "load_releases", lambda engine: data if engine == "vllm" else None)
    token = by_typed(parse_launch("vllm", "HF_TOKEN=x vllm serve M", version="0.8.5"))["HF_TOKEN"]
    assert token.validity == "ok" and "read by vllm 0.8.5 itself" in (token.validity_detail or "")
    other = by_typed(parse_launch("vllm", "NCCL_DEBUG=INFO vllm serve M", version="0.8.5"))["NCCL_DEBUG"]
    assert other.validity == "unknown" and "library" in (other.validity_detail or "")


def test_tgi_model_id_and_arguments_from_the_environment_yield_to_the_command_line() -> None:
    # clap reads each launcher argument from its env var when the command line does not give it
    launch = parse_launch(
        "tgi",
        "docker run -e MODEL_ID=org/m -e QUANTIZE=gptq ghcr.io/huggingface/"
        "text-generation-inference:2.1.0 --quantize awq",
        version="2.1.0",
    )
    assert launch.model == "org/m" and by_typed(launch)["MODEL_ID"].intent == "model"
    assert launch.values["quantization"] == "awq"
