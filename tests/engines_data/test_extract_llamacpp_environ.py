"""The environment variables llama-server reads itself (engines/extract/llamacpp_environ.py) on written snippets of
each pattern read, the LLAMA_ARG_* variables of the 2024 parser put on their options, and the packaged llama.cpp
data's environment table."""

from __future__ import annotations

import textwrap

from switchover.engines.extract import SourceTree, llamacpp
from switchover.engines.extract.llamacpp_environ import CppReads, cpp_reads, environment, negative_env, wrappers
from switchover.engines.releases import view

COMMON = textwrap.dedent("""
    std::string common_get_env(const std::string & name) {
        const char * value = std::getenv(name.c_str());
        return value == nullptr ? "" : value;
    }

    std::filesystem::path common_get_path_from_env(const std::string & name) {
    #if defined(_WIN32)
        const std::wstring wname = utf8_to_wstring(name);
        const wchar_t * wvalue = _wgetenv(wname.c_str());
        return wvalue ? std::filesystem::path(wvalue) : std::filesystem::path();
    #else
        const char * value = std::getenv(name.c_str());
        return value ? std::filesystem::path(value) : std::filesystem::path();
    #endif
    }

    std::filesystem::path fs_get_cache_directory() {
        std::filesystem::path cache_directory = common_get_path_from_env("LLAMA_CACHE");
        // getenv("COMMENTED_OUT")
        std::string endpoint = common_get_env("MODEL_ENDPOINT");
        const char * s = "getenv(\\"IN_A_STRING\\")";
        return cache_directory;
    }
""")

HEADER = textwrap.dedent("""
    std::string common_get_env(const std::string & name);
    std::filesystem::path common_get_path_from_env(const std::string & name);
""")

HF_CACHE = textwrap.dedent("""
    #if defined(_WIN32)
    #define HOME_DIR "USERPROFILE"
    #else
    #define HOME_DIR "HOME"
    #endif

    static fs::path get_cache_directory() {
        static const fs::path cache = []() {
            struct {
                const char * var;
                fs::path path;
            } entries[] = {
                {"LLAMA_CACHE",  fs::path()},
                {"HF_HUB_CACHE", fs::path()},
                {HOME_DIR,       fs::path(".cache") / "huggingface" / "hub"}
            };
            for (const auto & entry : entries) {
                if (fs::path base = common_get_path_from_env(entry.var); !base.empty()) {
                    return base;
                }
            }
            return fs::path();
        }();
        return cache;
    }
""")

SERVER_HTTP = textwrap.dedent("""
    struct gcp_params {
        gcp_params() {
            enabled = getenv("AIP_MODE", "") == "PREDICTION";
            path_predict = getenv("AIP_PREDICT_ROUTE", "/predict", true);
            port = std::stoi(getenv("AIP_HTTP_PORT", "8080"));
        }

        static std::string getenv(const char * name, const std::string & default_value, bool slash = false) {
            const auto * value = std::getenv(name);
            return value ? value : default_value;
        }
    };
""")

LIBLLAMA = textwrap.dedent("""
    llama_batch_allocr::llama_batch_allocr(uint32_t n_pos_per_embd) : n_pos_per_embd(n_pos_per_embd) {
        const char * LLAMA_BATCH_DEBUG = getenv("LLAMA_BATCH_DEBUG");
        debug = LLAMA_BATCH_DEBUG ? atoi(LLAMA_BATCH_DEBUG) : 0;
        if (const char * scale = std::getenv("LLAMA_SCALE")) {
            factor = std::stof(scale);
        }
        verbose = std::getenv("LLAMA_TRACE") != nullptr;
    }
""")

ARG_CPP = textwrap.dedent("""
    bool common_arg::get_value_from_env(std::string & output) const {
        if (env == nullptr) return false;
        if (!args_neg.empty()) {
            std::string neg_env = env;
            string_replace_all(neg_env, "LLAMA_ARG_", "LLAMA_ARG_NO_");
            char * neg_value = std::getenv(neg_env.c_str());
            if (neg_value) { output = "0"; return true; }
        }
        char * value = std::getenv(env);
        return value != nullptr;
    }
""")


def _files() -> dict[str, str]:
    return {
        "common/common.cpp": COMMON,
        "common/common.h": HEADER,
        "common/hf-cache.cpp": HF_CACHE,
        "tools/server/server-http.cpp": SERVER_HTTP,
        "src/llama-batch.cpp": LIBLLAMA,
    }


def test_wrappers_hand_a_parameter_to_getenv_and_say_which_is_the_default() -> None:
    found = wrappers(_files())
    assert {name: (w.name_at, w.default_at) for name, w in found.items()} == {
        "common_get_env": (0, None),
        "common_get_path_from_env": (0, None),
        "getenv": (0, 1),
    }


def test_reads_name_their_variables_by_literal_define_or_walked_table() -> None:
    found = wrappers(_files())
    reads = CppReads()
    for path, code in _files().items():
        cpp_reads(path, code, found, reads)
    facts = reads.facts(set())
    assert set(facts) == {
        "LLAMA_CACHE",
        "MODEL_ENDPOINT",
        "HF_HUB_CACHE",
        "USERPROFILE",
        "HOME",
        "AIP_MODE",
        "AIP_PREDICT_ROUTE",
        "AIP_HTTP_PORT",
        "LLAMA_BATCH_DEBUG",
        "LLAMA_SCALE",
        "LLAMA_TRACE",
    }
    assert facts["LLAMA_CACHE"]["path"] == "common/common.cpp"  # read in two files: the first read cites it
    assert (facts["AIP_HTTP_PORT"]["kind"], facts["AIP_HTTP_PORT"]["default"]) == ("int", "8080")
    assert facts["AIP_PREDICT_ROUTE"]["default"] == "/predict" and facts["AIP_MODE"]["default"] == ""
    assert facts["LLAMA_BATCH_DEBUG"]["kind"] == "int" and facts["LLAMA_SCALE"]["kind"] == "float"
    assert facts["LLAMA_TRACE"]["kind"] == "unknown"  # only tested for presence
    assert reads.unnamed == []  # the wrappers' own getenv(name) are how they work; declarations are no calls


def test_a_read_of_a_computed_name_is_said_unnamed() -> None:
    reads = CppReads()
    cpp_reads("common/arg.cpp", ARG_CPP, {}, reads)
    assert reads.reads == {} and reads.unnamed == ["common/arg.cpp:7", "common/arg.cpp:10"]


def test_negative_env_variables_of_options_with_a_negative_form() -> None:
    flags = {
        "--mmap": {"env": "LLAMA_ARG_MMAP", "negation": "--no-mmap", "negations": []},
        "--ctx-size": {"env": "LLAMA_ARG_CTX_SIZE", "negation": None, "negations": []},
        "--cont-batching": {"env": "LLAMA_ARG_CONT_BATCHING", "negation": None, "negations": ["-nocb"]},
        "--api-key": {"env": "LLAMA_API_KEY", "negation": "--no-api-key", "negations": []},
    }
    assert set(negative_env(SourceTree(files={"common/arg.cpp": ARG_CPP}), flags)) == {
        "LLAMA_ARG_NO_MMAP",
        "LLAMA_ARG_NO_CONT_BATCHING",
    }
    assert negative_env(SourceTree(files={"common/arg.cpp": "bool f() { return std::getenv(env); }"}), flags) == {}


def test_environment_leaves_out_the_options_own_variables() -> None:
    tree = SourceTree(files={**_files(), "common/arg.cpp": ARG_CPP})
    flags = {"--host": {"env": "HOME"}, "--mmap": {"env": "LLAMA_ARG_MMAP", "negation": "--no-mmap"}}
    facts, files, unnamed = environment(tree, flags)
    assert "HOME" not in facts and facts["LLAMA_ARG_NO_MMAP"]["path"] == "common/arg.cpp"
    assert files == [
        "common/arg.cpp",
        "common/common.cpp",
        "common/hf-cache.cpp",
        "src/llama-batch.cpp",
        "tools/server/server-http.cpp",
    ]
    assert unnamed == ["common/arg.cpp:7", "common/arg.cpp:10"]


COMMON_2024 = textwrap.dedent("""
    template<typename T>
    static typename std::enable_if<std::is_same<T, std::string>::value, void>::type
    get_env(std::string name, T & target) {
        char * value = std::getenv(name.c_str());
        target = value ? std::string(value) : target;
    }

    bool gpt_params_find_arg(int argc, char ** argv, const std::string & arg, gpt_params & params, int & i,
                             bool & invalid_param) {
        if (arg == "-c" || arg == "--ctx-size") {
            CHECK_ARG
            params.n_ctx = std::stoi(argv[i]);
            return true;
        }
        if (arg == "-cb" || arg == "--cont-batching") {
            params.cont_batching = true;
            return true;
        }
        if (arg == "-nocb" || arg == "--no-cont-batching") {
            params.cont_batching = false;
            return true;
        }
        if (arg == "--no-slots") {
            params.endpoint_slots = false;
            return true;
        }
        if (arg == "--hf-token") {
            CHECK_ARG
            params.hf_token = argv[i];
            return true;
        }
        return false;
    }

    bool gpt_params_parse_ex(int argc, char ** argv, gpt_params & params) {
        if (params.hf_token.empty()) {
            get_env("HF_TOKEN", params.hf_token);
        }
        return true;
    }

    void gpt_params_parse_from_env(gpt_params & params) {
        get_env("LLAMA_ARG_CTX_SIZE",       params.n_ctx);
        get_env("LLAMA_ARG_CONT_BATCHING",  params.cont_batching);
        get_env("LLAMA_ARG_ENDPOINT_SLOTS", params.endpoint_slots);
    }

    void never_called(gpt_params & params) {
        get_env("LLAMA_ARG_UNUSED", params.n_ctx);
    }
""")


def test_the_2024_parser_puts_env_variables_on_the_options_that_set_their_field() -> None:
    server = "int main() { gpt_params_parse_from_env(params); gpt_params_parse(argc, argv, params); }"
    opts = llamacpp.common_cpp_options(COMMON_2024, None, server)
    env = {name: fact.get("env") for name, fact in opts.items()}
    assert env == {
        "--ctx-size": "LLAMA_ARG_CTX_SIZE",
        "--cont-batching": "LLAMA_ARG_CONT_BATCHING",
        "--no-cont-batching": None,
        "--no-slots": None,  # 1/true turns slots on: no spelling of it
        "--hf-token": "HF_TOKEN",
    }  # read in the parser itself
    assert llamacpp.common_cpp_options(COMMON_2024, None, "")["--ctx-size"].get("env") is None  # not called
    facts = llamacpp.extract(SourceTree(files={"common/common.cpp": COMMON_2024, "tools/server/server.cpp": server}))
    assert "LLAMA_ARG_ENDPOINT_SLOTS" in facts.environment and "LLAMA_ARG_CTX_SIZE" not in facts.environment


def test_llamacpp_data_says_which_builds_read_which_variables() -> None:
    new, mid, old = view("llamacpp", "b11434"), view("llamacpp", "b6133"), view("llamacpp", "b3658")
    assert new is not None and mid is not None and old is not None
    cache = new.env_var("LLAMA_CACHE")
    assert cache.status == "present" and cache.url == (
        "https://github.com/ggml-org/llama.cpp/blob/b11434/common/common.cpp"
    )
    assert mid.env_var("LLAMA_SET_ROWS").status == "present" and new.env_var("LLAMA_SET_ROWS").status == "absent"
    assert new.env_var("LLAMA_ARG_NO_MMPROJ_OFFLOAD").status == "present"
    assert new.env_option("HF_TOKEN") is not None  # --hf-token's, not the table's
    assert new.env_var("GGML_CUDA_ENABLE_UNIFIED_MEMORY").status == "unknown"  # ggml's variables are not read
    assert new.env_var("LLAMA_NOT_A_VARIABLE").status == "absent"  # llama.cpp's own namespace
    ctx = old.env_option("LLAMA_ARG_CTX_SIZE")
    assert ctx is not None and ctx.name == "--ctx-size" and ctx.status == "present"
