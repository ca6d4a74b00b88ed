"""plan.launch: values written inside an option's own word (`-tp=2`, `-p8080`, `--ctx-size=4096`) and options given
without their value, read the way each engine's parser reads them (the profile's launch.inline_values and the
release data's value rules), against synthetic release data."""

from __future__ import annotations

import pytest

from switchover.engines import releases
from switchover.engines.releases import EngineReleases, ParserRules
from switchover.plan.launch import parse_launch
from tests.plan.records import by_typed
from tests.plan.release_data import engine_data, span

VLLM = {
    "--model": span(),
    "--tensor-parallel-size": span(kind="int", aliases=["-tp"]),
    "--quantization": span(aliases=["-q"], choices=["awq", "fp8"]),
    "--max-num-seqs": span(kind="int"),
    "--enforce-eager": span(False, kind="bool"),
    "--served-model-name": span(kind="list"),
    "--enable-chunked-prefill": span(kind="bool", value_optional=True, choices=["true", "false"]),
}
SGLANG = {"--model-path": span(), "--tp-size": span(kind="int"), "--host": span()}
TGI = {
    "--model-id": span(env="MODEL_ID"),
    "--port": span(kind="int", aliases=["-p"], env="PORT"),
    "--sharded": span(kind="bool", choices=["true", "false"], env="SHARDED"),
}
LLAMACPP = {
    "--model": span(aliases=["-m"]),
    "--ctx-size": span(kind="int", aliases=["-c"]),
    "--flash-attn": span(aliases=["-fa"], choices=["on", "off", "auto"]),
    "--port": span(kind="int"),
}


@pytest.fixture(autouse=True)
def release_data(no_release_data: dict[str, EngineReleases]) -> None:
    # attached_short: a one-letter option's value may be joined to it (argparse; the release data's parser rule)
    no_release_data.update(
        {
            "vllm": engine_data(
                "vllm",
                ParserRules(abbrev=True, underscores=True, attached_short=True, source="vllm/utils.py"),
                {"0.8.4": VLLM},
                tag="",
            ),
            "sglang": engine_data(
                "sglang", ParserRules(abbrev=True, source="server_args.py"), {"0.3.2": SGLANG}, tag=""
            ),
            "tgi": engine_data(
                "tgi", ParserRules(attached_short=True, source="launcher/src/main.rs"), {"3.1.1": TGI}, tag=""
            ),
            "llamacpp": engine_data(
                "llamacpp", ParserRules(underscores=True, source="common/arg.cpp"), {"b11549": LLAMACPP}, tag=""
            ),
        }
    )


def test_argparse_splits_a_short_alias_at_its_equals_sign_vllm_tp_equals_2() -> None:
    # argparse looks up the part before '=' of any option word, single dash included (vLLM issue 16777 launched
    # `vllm serve M -tp=2 --max-num-seqs=1`)
    launch = parse_launch("vllm", "vllm serve M -tp=2 --max-num-seqs=1 -q=fp8", version="0.8.4")
    rec = by_typed(launch)
    assert rec["-tp"].option == "--tensor-parallel-size" and rec["-tp"].value == "2" and rec["-tp"].validity == "ok"
    assert launch.values["tensor_parallel_size"] == 2 and launch.values["max_concurrent_sequences"] == 1
    assert rec["-q"].value == "fp8" and launch.values["quantization"] == "fp8"


def test_a_value_joined_to_a_one_letter_option_is_its_value_where_the_release_parser_reads_one() -> None:
    launch = parse_launch("vllm", "vllm serve M -qawq --max-num-seqs 4", version="0.8.4")
    rec = by_typed(launch)["-q"]
    assert rec.option == "--quantization" and rec.value == "awq" and launch.values["quantization"] == "awq"
    assert launch.values["max_concurrent_sequences"] == 4  # the next word is not taken as -q's value


def test_a_value_joined_to_a_switch_is_refused() -> None:
    rec = by_typed(parse_launch("vllm", "vllm serve M --enforce-eager=true", version="0.8.4"))["--enforce-eager"]
    assert rec.validity == "refused" and "takes no value" in (rec.validity_detail or "")


def test_an_abbreviation_with_its_value_after_equals_sglang_tp_equals_4() -> None:
    launch = parse_launch(
        "sglang", "python -m sglang.launch_server --model-path M --tp=4 --host=0.0.0.0", version="0.3.2"
    )
    assert by_typed(launch)["--tp"].option == "--tp-size" and launch.values["tensor_parallel_size"] == 4


@pytest.mark.parametrize("word", ["-p=8080", "-p8080", "--port=8080"])
def test_clap_reads_the_short_and_long_forms_with_a_joined_value_tgi_port(word: str) -> None:
    launch = parse_launch("tgi", f"text-generation-launcher --model-id M {word}", version="3.1.1")
    assert launch.values["port"] == 8080 and all(x.validity == "ok" for x in launch.inputs)


def test_llamacpp_refuses_an_option_written_with_equals_and_says_how_it_takes_the_value() -> None:
    launch = parse_launch("llamacpp", "llama-server -m m.gguf --ctx-size=4096 --port 8080", version="b11549")
    rec = by_typed(launch)["--ctx-size=4096"]
    assert rec.validity == "refused" and rec.option == "--ctx-size"
    assert "whole word" in (rec.validity_detail or "") and "max_context_length" not in launch.values
    assert launch.values["port"] == 8080  # the next option is read as usual


def test_a_valued_option_given_bare_is_refused_llamacpp_flash_attn() -> None:
    # llama.cpp b11549: -fa takes on|off|auto; alone it is refused ("expected value for argument")
    rec = by_typed(parse_launch("llamacpp", "llama-server -m m.gguf -fa", version="b11549"))["-fa"]
    assert rec.validity == "refused" and "needs a value" in (rec.validity_detail or "")


def test_a_valued_option_followed_by_another_option_is_refused_clap_sharded() -> None:
    rec = by_typed(parse_launch("tgi", "text-generation-launcher --sharded --model-id M", version="3.1.1"))
    assert rec["--sharded"].validity == "refused" and rec["--model-id"].validity == "ok"


def test_a_bare_option_with_an_optional_value_stays_ok_and_a_bare_list_is_refused() -> None:
    rec = by_typed(parse_launch("vllm", "vllm serve M --enable-chunked-prefill --served-model-name", version="0.8.4"))
    assert rec["--enable-chunked-prefill"].validity == "ok"
    assert rec["--served-model-name"].validity == "refused"


def test_config_file_keys_are_checked_where_the_release_data_lists_them(monkeypatch: pytest.MonkeyPatch) -> None:
    # trtllm-serve --config: TorchLlmArgs fields as yaml:KEY facts (extract.trtllm_config); a key the LLM-API does not
    # have is refused, one it has is ok although no command-line option is spelled like it
    flags = {
        "--tp_size": span(kind="int"),
        "--max_batch_size": span(kind="int"),
        "--extra_llm_api_options": span(aliases=["--config"]),
        "yaml:print_iter_log": span(kind="bool"),
        "yaml:max_batch_size": span(kind="int"),
        "yaml:kv_cache_config": span(kind="json"),
        "yaml:kv_cache_config.free_gpu_memory_fraction": span(kind="float"),
        "yaml:kv_cache_config.dtype": span(choices=["auto", "fp8"]),
        "yaml:cuda_graph_config": span(kind="json"),
    }
    data = engine_data("trtllm", ParserRules(source="tensorrt_llm/commands/serve.py"), {"1.3.0rc3": flags}, tag="")
    monkeypatch.setattr(releases, "load_releases", lambda engine: data if engine == "trtllm" else None)
    options = (
        "print_iter_log: true\nmax_batch_size: 32\nkv_cache_config:\n  free_gpu_memory_fraction: 0.8\n"
        "cuda_graph_config:\n  anything: 1\nnot_a_key: 3\n"
    )
    launch = parse_launch(
        "trtllm", "trtllm-serve /m --config opts.yml", version="1.3.0rc3", files={"opts.yml": options}
    )
    rec = by_typed(launch)
    assert rec["print_iter_log"].validity == "ok" and rec["max_batch_size"].validity == "ok"
    assert launch.values["max_concurrent_sequences"] == 32 and launch.values["gpu_memory_fraction"] == 0.8
    assert rec["cuda_graph_config"].validity == "ok"  # a free-form section: its keys are not checked
    assert rec["not_a_key"].validity == "refused"
    wrong = parse_launch(
        "trtllm",
        "trtllm-serve /m --config o.yml",
        version="1.3.0rc3",
        files={"o.yml": "kv_cache_config:\n  free_gpu_memory: 0.8\n"},
    )
    bad = by_typed(wrong)["kv_cache_config"]
    assert bad.validity == "refused" and "kv_cache_config.free_gpu_memory" in (bad.validity_detail or "")
