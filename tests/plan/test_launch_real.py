"""Real launches from public issues and engine docs, each with its link and the version its poster stated (an image
tag counts), read against the packaged release data: every flag is a record, the flags the engine refused at that
version are the refused ones, and no flag is 'unknown' where the data covers the version (the few exceptions say
why). `pytest -s` prints the per-engine figure: launches read with zero unknown flags."""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass, field

import pytest

from switchover.engines.releases import load_releases, view
from switchover.plan.launch import parse_launch
from switchover.plan.translate import render

ENGINES = ("vllm", "sglang", "tgi", "llamacpp", "trtllm")


@dataclass(frozen=True)
class Case:
    """One launch as posted: engine, stated version (None: the image tag says it), link, text, files it names."""

    engine: str
    version: str | None
    link: str
    text: str
    files: dict[str, str] = field(default_factory=dict)
    refused: tuple[str, ...] | None = ()  # flags that version does not accept (the poster's error, or the data's)
    unknown: tuple[str, ...] | None = ()  # flags the data cannot settle there; None: no release data read yet


CASES = [
    Case(
        "vllm",
        "0.4.3",
        "https://github.com/vllm-project/vllm/issues/5302",
        "python3 -m vllm.entrypoints.openai.api_server --model "
        "./Qwen1.5-72B-Chat/ --max-model-len 24000 --tensor-parallel-size 8 "
        "--swap-space 20 --gpu-memory-utilization 0.9 --max-num-seqs 8 "
        "--speculative-model ./Qwen1.5-14B-Chat/ --num-speculative-tokens 4 "
        "--speculative-max-model-len 24000 --use-v2-block-manager",
        files={},
        refused=(),
        unknown=(),
    ),
    Case(
        "vllm",
        "0.6.0",
        "https://github.com/vllm-project/vllm/issues/8274",
        "vllm serve neuralmagic/Meta-Llama-3.1-70B-Instruct-FP8  --host "
        "0.0.0.0   --port 8000   --tensor-parallel-size 8  --seed 1234  "
        "--enable_prefix_caching --enable-chunked-prefill  --max-model-len "
        "32000  --num-scheduler-steps 8",
        files={},
        refused=(),
        unknown=(),
    ),  # --enable-chunked-prefill is nargs='?' at 0.6.0: a bare one is taken
    Case(
        "vllm",
        "0.9.2.dev121+g4c8f64faa",
        "https://github.com/vllm-project/vllm/issues/19775",
        "python -m vllm.entrypoints.openai.api_server \\\n"
        "    --host 0.0.0.0 \\\n"
        "    --port 8000 \\\n"
        "    --model meta-llama/Llama-3.3-70B-Instruct \\\n"
        "    --seed 42 \\\n"
        "    -tp 4 \\\n"
        "    --max-model-len 4096 \\\n"
        '    --speculative_config \'{"model": "meta-llama/Llama-3.2-1B", '
        '"num_speculative_tokens": 5}\'',
        files={},
        refused=(),
        unknown=(),
    ),
    Case(
        "vllm",
        "0.10.0",
        "https://github.com/vllm-project/vllm/issues/18538",
        "vllm serve Qwen/Qwen3-8B --enable-reasoning --reasoning-parser deepseek_r1",
        files={},
        refused=("--enable-reasoning",),
        unknown=(),
    ),
    Case(
        "sglang",
        "0.5.5",
        "https://github.com/sgl-project/sglang/issues/12818",
        "python -m sglang.launch_server --model-path "
        "/moonshotai/Kimi-K2-Thinking --tp 8 --disable-radix-cache  "
        "--trust-remote-code  --tool-call-parser kimi_k2 --reasoning_parser "
        "kimi_k2  --context-length 262144",
        files={},
        refused=("--reasoning_parser",),
        unknown=(),
    ),
    Case(
        "sglang",
        None,
        "https://github.com/sgl-project/sglang/issues/14435",
        "docker run -it --gpus all \\\n"
        "    --shm-size 32g \\\n"
        "    --name sglang \\\n"
        "    -p 30000:30000 \\\n"
        "    -v /data3/llm_model/:/models \\\n"
        "    docker.1ms.run/lmsysorg/sglang:v0.5.6 \\\n"
        "    python3 -m sglang.launch_server \\\n"
        "        --model-path /models/DeepSeek-R1/ \\\n"
        "        --host 0.0.0.0 \\\n"
        "        --port 30000 \\\n"
        "        --enable-dp-attention \\\n"
        "         --trust-remote-code \\\n"
        "        --speculative-algorithm EAGLE \\\n"
        "        --speculative-num-steps 3 \\\n"
        "        --speculative-eagle-topk 1 \\\n"
        "        --speculative-num-draft-tokens 4 \\\n"
        "        --tp 8 \\\n"
        "        --enable-dp-attention \\\n"
        "        --reasoning-parser deepseek-v3 \\\n"
        "        --tool-call-parser deepseekv3   \\\n"
        "        --chat-template ./examples/chat_template/tool_chat_template_de"
        "epseekv3.jinja",
        files={},
        refused=(),
        unknown=(),
    ),
    Case(
        "tgi",
        None,
        "https://github.com/huggingface/text-generation-inference/pull/1709",
        "docker run -d --restart=always --gpus '\"device=7\"' \\\n"
        "--shm-size 12g \\\n"
        "-v $HOME/.cache/huggingface/hub/:/data \\\n"
        "-p 30030:80 \\\n"
        "--name next34b \\\n"
        "ghcr.io/huggingface/text-generation-inference:2.0.4 \\\n"
        "--model-id liuhaotian/llava-v1.6-34b --trust-remote-code "
        "--max-stop-sequences=10 \\\n"
        "--max-batch-prefill-tokens=32768 --max-input-length 4096 "
        "--max-total-tokens 8192",
        files={},
        refused=(),
        unknown=(),
    ),
    Case(
        "tgi",
        None,
        "https://github.com/huggingface/text-generation-inference/issues/2400",
        "docker run --gpus all --shm-size 1g -p 8080:80 --env-file ./env.list "
        "-v $PWD/data:/data \\\n"
        "    ghcr.io/huggingface/text-generation-inference:2.2.0 --model-id "
        "meta-llama/Meta-Llama-3.1-8B",
        files={
            "./env.list": "HF_MODEL_ID=meta-llama/Meta-Llama-3.1-8B\n"
            "HF_TOKEN=<TOKEN>\n"
            "QUANTIZE=bitsandbytes\n"
            "LORA_ADAPTERS=<path/to/custom/adapter>\nUSE_FLASH_ATTENTION=False\n"
        },
        refused=(),
        unknown=(),
    ),
    Case(
        "tgi",
        None,
        "https://github.com/QwenLM/Qwen3/pull/557",
        "docker run --gpus all --shm-size 1g -p 8080:80 -v $volume:/data "
        "ghcr.io/huggingface/text-generation-inference:2.0 --model-id $model "
        "--quantize gptq",
        files={},
        refused=(),
        unknown=(),
    ),
    Case(
        "llamacpp",
        "b8637",
        "https://github.com/ggml-org/llama.cpp/issues/21318",
        "CUDA_VISIBLE_DEVICES=0,1,2 /llamacpp/llama.cpp/build/bin/llama-server "
        "--model /models/gemma/gemma-4-31B-it-UD-Q6_K_XL.gguf --alias gemma4 "
        "--host 0.0.0.0 --port 11434 --n-gpu-layers 999 --split-mode layer "
        "--main-gpu 0 --tensor-split 0.7,1.06,0.96 --batch-size 2048 --threads "
        "16 --temp 1.0 --top-k 64 --flash-attn on --top-p 0.95 --min-p 0.0 "
        "--ubatch-size 512 --cont-batching --ctx-size 131072 --parallel 1 "
        "--verbose --mmproj /models/gemma/mmproj-F32.gguf",
        # --split-mode is defined differently in b8390 and b9093 (b9093 adds `tensor`): 'layer' is in both
        files={},
        refused=(),
        unknown=(),
    ),
    Case(
        "llamacpp",
        "b4621",
        "https://github.com/ggml-org/llama.cpp/issues/11681",
        "./llama-server \\\n"
        "    --model models/deepseek-v3-q2_k_xs-00001-of-00005.gguf --alias "
        "full \\\n"
        "    --host 0.0.0.0 \\\n"
        "    --port 55055 \\\n"
        "    --ctx-size 0 \\\n"
        "    --cache-type-k q5_0 \\\n"
        '    --slot-save-path "saved_slots.kvc" \\\n'
        "    --threads 94 \\\n"
        "    --threads-http 12 \\\n"
        "    --parallel 6 \\\n"
        "    --mirostat 2 \\\n    --mirostat-ent 5.7 \\\n    --mirostat-lr 0.14",
        files={},
        refused=(),
        unknown=(),
    ),
    Case(
        "llamacpp",
        "b7929",
        "https://github.com/ggml-org/llama.cpp/issues/19308",
        "./llama-server -hf unsloth/Llama-4-Scout-17B-16E-Instruct-GGUF:Q4_K_XL"
        " -np 128 -c 262144 --cache-ram 0 --log-verbosity 3 --port 8080",
        files={},
        refused=(),
        unknown=(),
    ),
    Case(
        "trtllm",
        "1.3.0rc11",
        "https://nvidia.github.io/TensorRT-LLM/1.3.0rc11/examples/deepseek_r1_reasoning_parser.html",
        "#! /usr/bin/env bash\n"
        "\n"
        "cat >./config.yml <<EOF\n"
        "cuda_graph_config:\n"
        "    enable_padding: true\n"
        "    max_batch_size: 512\n"
        "enable_attention_dp: true\n"
        "kv_cache_config:\n"
        "    dtype: fp8\n"
        "    free_gpu_memory_fraction: 0.8\n"
        "stream_interval: 10\n"
        "moe_config:\n"
        "    backend: DEEPGEMM\n"
        "EOF\n"
        "\n"
        "trtllm-serve \\\n"
        "    deepseek-ai/DeepSeek-R1 \\\n"
        "    --host localhost --port 8000 \\\n"
        "    --trust_remote_code \\\n"
        "    --max_batch_size 1024 --max_num_tokens 8192 \\\n"
        "    --tp_size 8 --ep_size 8 --pp_size 1 \\\n"
        "    --config ./config.yml \\\n    --reasoning_parser deepseek-r1",
        files={},
        refused=None,
        unknown=None,
    ),  # trtllm-serve: no release data generated when this was written
]


def _unknown(case: Case) -> list[str]:
    """Command-line and config flags the release data could not check (env vars of libraries are not flags)."""
    launch = parse_launch(case.engine, case.text, version=case.version, files=case.files)
    return [x.typed for x in launch.inputs if x.validity == "unknown" and x.via != "env"]


@pytest.mark.parametrize(
    "case", CASES, ids=[c.link.rsplit("/", 2)[-2] + "-" + c.link.rsplit("/", 1)[-1][:30] for c in CASES]
)
def test_a_real_launch_reads_as_its_engine_read_it(case: Case) -> None:
    launch = parse_launch(case.engine, case.text, version=case.version, files=case.files)
    assert launch.inputs, "every flag is a record"
    refused = tuple(x.typed for x in launch.inputs if x.validity == "refused")
    if load_releases(case.engine) is None:
        assert "release data: flags not checked against a release" in (launch.version_note or "")
        return
    if case.refused is not None:
        assert refused == case.refused
    if case.unknown is not None:
        assert tuple(_unknown(case)) == case.unknown


@pytest.mark.parametrize("case", CASES, ids=[c.link.rsplit("/", 1)[-1][:30] for c in CASES])
def test_a_real_launch_renders_only_options_each_target_has(case: Case) -> None:
    launch = parse_launch(case.engine, case.text, version=case.version, files=case.files)
    for target in ENGINES:
        tr = render(launch, target)
        assert [f.input for f in tr.flags] == launch.inputs  # one outcome per input flag
        data = view(target, None)
        if data is None:
            continue
        for word in tr.argv:
            if word.startswith("--"):
                assert data.option(word).status == "present", (target, word, case.link)


def test_the_per_engine_figure() -> None:
    """Launches per engine, and how many read with zero unknown flags (printed with -s)."""
    table: dict[str, list[int]] = defaultdict(lambda: [0, 0])
    for case in CASES:
        table[case.engine][0] += 1
        table[case.engine][1] += not _unknown(case)
    print("\nengine    launches  zero unknown flags")
    for engine in ENGINES:
        total, clean = table[engine]
        print(f"{engine:9} {total:8}  {clean}")
    assert sum(t[0] for t in table.values()) == len(CASES)
