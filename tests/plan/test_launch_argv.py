"""plan.launch_argv: shells and container runtimes reduced to the words an engine's parser sees."""

from __future__ import annotations

from typing import Any

import pytest

from switchover.errors import BadInput
from switchover.plan.launch_argv import env_file, image_parts, parse_manifest, parse_script, program_name


def _engine(words: list[str]) -> bool:
    return words[0] in ("vllm", "trtllm-serve", "llama-server") or words[0].startswith("-")


def test_env_prefixes_become_the_processes_environment() -> None:
    raw = parse_script("X=1 HF_TOKEN=abc vllm serve M --max-model-len 8192", _engine)
    assert raw is not None
    assert [(e.name, e.value, e.how) for e in raw.env] == [("X", "1", "prefix"), ("HF_TOKEN", "abc", "prefix")]
    assert raw.words == ["vllm", "serve", "M", "--max-model-len", "8192"]


def test_json_values_stay_one_word() -> None:
    raw = parse_script("""vllm serve M --kv-transfer-config '{"kv_connector": "x", "kv_role": "kv_both"}'""", _engine)
    assert raw is not None and raw.words[-1] == '{"kv_connector": "x", "kv_role": "kv_both"}'


def test_scripts_with_variables_exports_and_continuations() -> None:
    text = """#!/bin/bash
model=/models/qwen
export CUDA_VISIBLE_DEVICES=0,1
vllm serve $model \\
    --tensor-parallel-size 2 \\
    --served-model-name "${model}-chat" > server.log 2>&1 &
"""
    raw = parse_script(text, _engine)
    assert raw is not None
    assert raw.words == [
        "vllm",
        "serve",
        "/models/qwen",
        "--tensor-parallel-size",
        "2",
        "--served-model-name",
        "/models/qwen-chat",
    ]
    assert [(e.name, e.value) for e in raw.env] == [("CUDA_VISIBLE_DEVICES", "0,1")]


def test_single_quotes_keep_a_dollar_literal() -> None:
    raw = parse_script("x=1\nvllm serve M --chat-template '$x'", _engine)
    assert raw is not None and raw.words[-1] == "$x"


def test_a_heredoc_that_writes_a_config_is_kept_as_that_file() -> None:
    text = """extra=/tmp/extra.yml
cat << EOF > ${extra}
kv_cache_config:
  free_gpu_memory_fraction: 0.85
EOF
trtllm-serve /m --extra_llm_api_options ${extra}
"""
    raw = parse_script(text, _engine)
    assert raw is not None and raw.words[-1] == "/tmp/extra.yml"
    assert raw.files == {"/tmp/extra.yml": "kv_cache_config:\n  free_gpu_memory_fraction: 0.85\n"}


def test_docker_run_options_are_the_runtimes_and_the_image_is_kept() -> None:
    text = (
        "docker run --runtime nvidia --gpus '\"device=0,1\"' -v ~/.cache:/root/.cache --env HF_TOKEN=x "
        "-e VLLM_LOGGING_LEVEL=DEBUG -p 8000:8000 --ipc=host -it --rm vllm/vllm-openai:v0.6.3 "
        "--model M --tensor-parallel-size 2"
    )
    raw = parse_script(text, _engine)
    assert raw is not None
    assert raw.image == "vllm/vllm-openai:v0.6.3" and raw.gpus == "device=0,1"
    assert raw.words == ["--model", "M", "--tensor-parallel-size", "2"]
    assert [(e.name, e.how) for e in raw.env] == [("HF_TOKEN", "docker -e"), ("VLLM_LOGGING_LEVEL", "docker -e")]


def test_docker_run_with_a_shell_command_and_an_env_file() -> None:
    raw = parse_script("sudo docker run --env-file ./env.list img:1 bash -c 'trtllm-serve /m --tp_size 2'", _engine)
    assert raw is not None and raw.words == ["trtllm-serve", "/m", "--tp_size", "2"]
    assert raw.image == "img:1" and raw.env_files == ["./env.list"]
    with pytest.raises(BadInput, match="no image"):
        parse_script("docker run --rm -p 1:1", _engine)


def test_kubernetes_container_args_command_and_env() -> None:
    manifest = {
        "spec": {
            "template": {
                "spec": {
                    "containers": [
                        {
                            "name": "vllm",
                            "image": "vllm/vllm-openai:v0.8.5",
                            "command": ["python3", "-m", "vllm.entrypoints.openai.api_server"],
                            "args": ["--model", "M", "--max-model-len=8192"],
                            "env": [
                                {"name": "CUDA_VISIBLE_DEVICES", "value": "0"},
                                {"name": "HF_TOKEN", "valueFrom": {}},
                            ],
                        }
                    ]
                }
            }
        }
    }
    raw = parse_manifest(manifest, _engine)
    assert raw is not None and raw.image == "vllm/vllm-openai:v0.8.5"
    assert raw.words[-3:] == ["--model", "M", "--max-model-len=8192"]
    assert [(e.name, e.value) for e in raw.env] == [("CUDA_VISIBLE_DEVICES", "0"), ("HF_TOKEN", "")]


def test_kubernetes_sh_c_and_a_bare_args_list() -> None:
    raw = parse_manifest({"command": ["/bin/sh", "-c"], "args": ["vllm serve M --port 8000"]}, _engine)
    assert raw is not None and raw.words == ["vllm", "serve", "M", "--port", "8000"]
    bare = parse_manifest(["--model", "M", 8], _engine)
    assert bare is not None and bare.words == ["--model", "M", "8"]


def test_a_script_with_no_engine_command_gives_none() -> None:
    assert parse_script("echo hello && ls -la", _engine) is None


@pytest.mark.parametrize(
    ("image", "parts"),
    [
        ("vllm/vllm-openai:v0.6.3", ("vllm/vllm-openai", "v0.6.3")),
        ("localhost:5000/tgi:2.0.4", ("localhost:5000/tgi", "2.0.4")),
        ("localhost:5000/tgi", ("localhost:5000/tgi", None)),
        ("ghcr.io/x/y:server@sha256:abc", ("ghcr.io/x/y", "server")),
    ],
)
def test_image_parts(image: str, parts: tuple[str, str | None]) -> None:
    assert image_parts(image) == parts


def test_env_files_are_key_value_lines() -> None:
    found = env_file("# comment\nQUANTIZE=bitsandbytes\n\nLORA_ADAPTERS=a/b,c/d\nnot a line\n", "env.list")
    assert [(e.name, e.value) for e in found] == [("QUANTIZE", "bitsandbytes"), ("LORA_ADAPTERS", "a/b,c/d")]


@pytest.mark.parametrize(
    "program", ["llama-server.exe", r".\llama-server.exe", r"C:\llama\llama-server.EXE", "build/bin/llama-server"]
)
def test_program_names_drop_the_directory_and_the_windows_exe_suffix(program: str) -> None:
    assert program_name(program) == "llama-server"


def test_a_windows_command_keeps_its_backslashes_and_caret_continuations() -> None:
    # cmd.exe has no backslash escape and continues a line with ^ (llama.cpp ships llama-server.exe for Windows)
    text = 'llama-server.exe ^\n  -m "E:\\LLM\\model-Q6_K.gguf" ^\n  --port 8084\n'
    raw = parse_script(text, lambda w: program_name(w[0]) == "llama-server")
    assert raw is not None and raw.words == ["llama-server.exe", "-m", "E:\\LLM\\model-Q6_K.gguf", "--port", "8084"]


def test_a_powershell_command_continues_with_a_backtick() -> None:
    text = ".\\llama-server.exe `\n  -m C:\\models\\m.gguf `\n  -c 4096\n"
    raw = parse_script(text, lambda w: program_name(w[0]) == "llama-server")
    assert raw is not None and raw.words == [".\\llama-server.exe", "-m", "C:\\models\\m.gguf", "-c", "4096"]


def test_a_posix_script_still_reads_backslash_as_an_escape() -> None:
    raw = parse_script("vllm serve M --served-model-name a\\ b", _engine)
    assert raw is not None and raw.words[-1] == "a b"


@pytest.mark.parametrize(
    "environment",
    [["HF_TOKEN=$HF_TOKEN", "CUDA_VISIBLE_DEVICES=0"], {"HF_TOKEN": "$HF_TOKEN", "CUDA_VISIBLE_DEVICES": 0}],
)
def test_a_compose_service_environment_list_or_mapping_is_the_containers_env(environment: Any) -> None:
    # compose `environment:` is a list of KEY=VALUE or a mapping
    # (https://docs.docker.com/reference/compose-file/services/#environment)
    service = {
        "image": "vllm/vllm-openai:v0.6.4",
        "command": ["--model", "M", "--port", "9000"],
        "environment": environment,
    }
    raw = parse_manifest(service, _engine)
    assert raw is not None and raw.image == "vllm/vllm-openai:v0.6.4"
    assert [(e.name, e.value, e.how) for e in raw.env] == [
        ("HF_TOKEN", "$HF_TOKEN", "compose environment"),
        ("CUDA_VISIBLE_DEVICES", "0", "compose environment"),
    ]


@pytest.mark.parametrize("prefix", ["uv run --with vllm==0.9.2", "uvx", "conda run -n serve", "pipx run"])
def test_python_environment_runners_start_the_engine_command(prefix: str) -> None:
    raw = parse_script(f"HF_TOKEN=x {prefix} vllm serve M --port 8000", _engine)
    assert raw is not None and raw.words == ["vllm", "serve", "M", "--port", "8000"]
