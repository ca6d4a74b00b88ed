"""The environment variables TGI reads itself (engines/extract/tgi_environ.py), on written snippets of each pattern
read, and the packaged TGI data's environment table at releases the issue's launches use."""

from __future__ import annotations

import textwrap

from switchover.engines.extract import SourceTree, tgi
from switchover.engines.extract.tgi_environ import (
    EnvReads,
    environment,
    passed_router_options,
    python_reads,
    rust_reads,
)
from switchover.engines.releases import view

LAUNCHER = textwrap.dedent("""
    #[derive(Parser, Debug)]
    struct Args {
        #[clap(long, env)]
        quantize: Option<String>,
        #[clap(long, env)]
        port: u16,
    }

    fn spawn_webserver(args: Args) {
        let mut router_args = vec![
            "--port".to_string(),
            args.port.to_string(),
            "--tokenizer-name".to_string(),
            args.model_id,
        ];
        if args.messages { router_args.push("--messages-api-enabled".to_string()); }
    }

    fn main() {
        let varname = "LOG_LEVEL";
        let env_filter = if let Ok(log_level) = std::env::var(varname) { log_level } else { "info" };
        let enable_hf_transfer = env::var("HF_HUB_ENABLE_HF_TRANSFER").unwrap_or("1".to_string());
        // env::var("COMMENTED_OUT")
        let wiggle_room: f32 = env::var("TGI_WIGGLE_ROOM")
            .ok()
            .and_then(|wiggle| wiggle.parse().ok())
            .unwrap_or(0.95);
        let attention: Option<String> = std::env::var("ATTENTION").ok();
        let quantize = std::env::var("QUANTIZE");
        let port = std::env::var("AIP_HTTP_PORT").map(|p| p.parse::<u16>().unwrap_or(port)).unwrap_or(port);
        let filter = EnvFilter::try_from_env("LOG_FORMAT");
        let api = ApiBuilder::from_env();
        let other = std::env::var(some_name());
    }
""")

ROUTER_MAIN = textwrap.dedent("""
    #[derive(Parser, Debug)]
    struct Args {
        #[clap(default_value = "3000", long, short, env)]
        port: u16,
        #[clap(long, env)]
        tokenizer_name: String,
        #[clap(long, env)]
        messages_api_enabled: bool,
        #[clap(default_value = "1073741824", long, env)]
        max_image_fetch_size: usize,
    }
""")

SERVER_PY = textwrap.dedent("""
    import os

    if os.getenv("USE_FLASH_ATTENTION", "").lower() == "false":
        pass
    RANK = int(os.getenv("RANK", "0"))
    MEMORY_FRACTION = float(os.getenv("CUDA_MEMORY_FRACTION", "1.0"))
    ATTENTION = os.environ["ATTENTION"]
    PREFIX_CACHING = os.environ["PREFIX_CACHING"].lower() in {"1", "true"}
    V2 = os.getenv("EXLLAMA_VERSION", "2") == "2"
    GAMMA = float(os.getenv("WATERMARK_GAMMA", 0.5))
    if "CUDA_GRAPHS" in os.environ:
        pass
    if os.environ.get("QUANTIZE") is None:
        pass
    name = "X"
    dynamic = os.getenv(name)
    os.environ["WRITTEN"] = "1"
""")


def _rust(code: str, path: str = "launcher/src/main.rs") -> EnvReads:
    reads = EnvReads()
    rust_reads(path, code, reads)
    return reads


def test_rust_reads_give_names_defaults_and_parsed_kinds() -> None:
    reads = _rust(LAUNCHER)
    facts = reads.facts(set())
    assert set(facts) == {
        "LOG_LEVEL",
        "HF_HUB_ENABLE_HF_TRANSFER",
        "TGI_WIGGLE_ROOM",
        "ATTENTION",
        "QUANTIZE",
        "AIP_HTTP_PORT",
        "LOG_FORMAT",
    }  # no comment, no from_env() of a library
    assert facts["HF_HUB_ENABLE_HF_TRANSFER"]["default"] == "1"
    assert (facts["TGI_WIGGLE_ROOM"]["kind"], facts["TGI_WIGGLE_ROOM"]["default"]) == ("float", "0.95")  # let x: f32
    assert (facts["AIP_HTTP_PORT"]["kind"], facts["AIP_HTTP_PORT"]["default"]) == ("int", None)  # not a literal
    assert (facts["ATTENTION"]["kind"], facts["ATTENTION"]["default"]) == ("unknown", None)
    line = next(i for i, text in enumerate(LAUNCHER.splitlines(), 1) if "some_name()" in text)
    assert reads.unnamed == [f"launcher/src/main.rs:{line}"]  # std::env::var(some_name()): cannot be named


def test_the_router_args_the_launcher_always_passes_are_its_literal_words() -> None:
    assert passed_router_options(LAUNCHER) == {"--port", "--tokenizer-name"}
    assert passed_router_options("fn main() {}") == set()


def test_python_reads_give_kinds_from_conversions_and_switch_words() -> None:
    reads = EnvReads()
    python_reads("server/text_generation_server/x.py", SERVER_PY, reads)
    facts = reads.facts(set())
    got = {n: (f["kind"], f["default"]) for n, f in facts.items()}
    assert got == {
        "USE_FLASH_ATTENTION": ("bool", ""),
        "RANK": ("int", "0"),
        "CUDA_MEMORY_FRACTION": ("float", "1.0"),
        "ATTENTION": ("unknown", None),
        "PREFIX_CACHING": ("bool", None),
        "EXLLAMA_VERSION": ("unknown", "2"),  # "2" is no switch word: any text is accepted
        "WATERMARK_GAMMA": ("float", "0.5"),
        "CUDA_GRAPHS": ("unknown", None),
        "QUANTIZE": ("unknown", None),
    }  # os.environ["WRITTEN"] = ... is a write
    line = next(i for i, text in enumerate(SERVER_PY.splitlines(), 1) if "os.getenv(name)" in text)
    assert reads.unnamed == [f"server/text_generation_server/x.py:{line}"]
    broken = EnvReads()
    python_reads("server/text_generation_server/y.py", "def (:\n", broken)
    assert broken.unnamed == ["server/text_generation_server/y.py: not parsed"]


def test_reads_of_one_variable_agree_or_say_nothing() -> None:
    reads = EnvReads()
    reads.add("TGI_WIGGLE_ROOM", "launcher/src/main.rs", "float", "0.95")
    reads.add("TGI_WIGGLE_ROOM", "server/a.py", "float", "0.90")
    reads.add("ATTENTION", "launcher/src/main.rs")
    reads.add("ATTENTION", "server/b.py", "str")
    reads.add("MIXED", "a.rs", "int")
    reads.add("MIXED", "b.py", "bool")
    facts = reads.facts({"ATTENTION"})
    assert facts["TGI_WIGGLE_ROOM"] == {
        "path": "launcher/src/main.rs",
        "kind": "float",
        "default": None,
        "choices": None,
    }  # the first read cites it; two defaults: none said
    assert facts["MIXED"]["kind"] == "unknown" and "ATTENTION" not in facts  # skipped: an option's env


def test_environment_joins_launcher_router_and_server_without_option_variables() -> None:
    tree = SourceTree(
        files={
            "launcher/src/main.rs": LAUNCHER,
            "launcher/build.rs": 'env::var("GIT_SHA")',
            "backends/v3/src/main.rs": ROUTER_MAIN,
            "server/text_generation_server/x.py": SERVER_PY,
        }
    )
    facts, files, _ = environment(tree, LAUNCHER, {"QUANTIZE", "PORT"})
    assert "GIT_SHA" not in facts  # build.rs runs at build time
    assert "QUANTIZE" not in facts and "PORT" not in facts  # launcher options read from the environment
    assert "TOKENIZER_NAME" not in facts  # the launcher always passes --tokenizer-name: the variable is never read
    assert facts["MAX_IMAGE_FETCH_SIZE"] == {
        "path": "backends/v3/src/main.rs",
        "kind": "int",
        "default": "1073741824",
        "choices": None,
    }
    assert facts["MESSAGES_API_ENABLED"]["choices"] is None and facts["MESSAGES_API_ENABLED"]["kind"] == "bool"
    assert facts["ATTENTION"]["path"] == "launcher/src/main.rs"  # the launcher's read cites it before the server's
    assert files == ["backends/v3/src/main.rs", "launcher/src/main.rs", "server/text_generation_server/x.py"]


def test_tgi_extract_fills_the_environment_table() -> None:
    tree = SourceTree(files={"launcher/src/main.rs": LAUNCHER, "server/text_generation_server/x.py": SERVER_PY})
    facts = tgi.extract(tree)
    assert "--quantize" in facts.flags and "QUANTIZE" not in facts.environment
    assert "USE_FLASH_ATTENTION" in facts.environment
    assert "server/text_generation_server/x.py" in facts.files


def test_tgi_data_says_which_release_reads_hf_token_and_use_flash_attention() -> None:
    old, new = view("tgi", "2.0.2"), view("tgi", "3.0.1")
    assert old is not None and new is not None
    flash = old.env_var("USE_FLASH_ATTENTION")
    assert flash.status == "present" and flash.url == (
        "https://github.com/huggingface/text-generation-inference/"
        "blob/v2.0.2/server/text_generation_server/utils/flash_attn.py"
    )
    assert new.env_var("USE_FLASH_ATTENTION").status == "present"
    token = new.env_var("HF_TOKEN")
    assert token.status == "present" and token.url is not None and "/blob/v3.0.1/launcher/src/main.rs" in token.url
    assert old.env_var("HF_TOKEN").status == "absent"  # 2.0.x reads HUGGING_FACE_HUB_TOKEN; HF_TOKEN from 2.1.0
    assert old.env_var("HUGGING_FACE_HUB_TOKEN").status == "present"
    assert new.env_option("QUANTIZE") is not None and new.env_var("QUANTIZE").status == "unknown"  # an option's
    assert new.env_var("NCCL_DEBUG").status == "unknown"  # no tag reads it: a library TGI loads may
    assert new.env_var("TGI_NOT_A_VARIABLE").status == "absent"  # TGI's namespace: no tag reads it
    assert new.env_var("PREFIX_CACHING").status == "present" and old.env_var("PREFIX_CACHING").status == "absent"
