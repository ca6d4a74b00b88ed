"""translate moves hardware: the layout from plan parallel, memory knob / context / slots from plan capacity, the
GPUs the process sees, and for llama.cpp the GGUF conversion step, a quantization that fits and every layer on GPU."""

from __future__ import annotations

import pytest

from switchover.model import card_from_config
from switchover.plan.translate import HardwareMove, translate
from tests.plan import configs as C
from tests.plan.records import after, outcomes

LAUNCH = (
    "CUDA_VISIBLE_DEVICES=0,1,2,3 vllm serve meta-llama/Llama-3.1-8B-Instruct -tp 4 --max-model-len 8192 "
    "--gpu-memory-utilization 0.95 --max-num-seqs 64"
)

# no engine has release data unless a test adds it (conftest.no_release_data)
pytestmark = pytest.mark.usefixtures("no_release_data")


def test_four_a100s_to_two_h100s_takes_plan_parallels_layout_and_a_new_memory_knob() -> None:
    card = card_from_config(C.LLAMA_8B, name="Llama-3.1-8B")
    tr = translate(
        "vllm", LAUNCH, "sglang", card=card, move=HardwareMove(from_gpu="A100-80G", to_gpu="H100-80G", to_gpus=2)
    )
    assert after(tr, "--tp-size") == "2" and tr.env["CUDA_VISIBLE_DEVICES"] == "0,1"
    out = outcomes(tr)
    assert "4 -> 2" in out["-tp"].detail and "plan parallel" in out["-tp"].detail
    assert "re-derived for 2 x H100-80G" in out["--gpu-memory-utilization"].detail
    assert 0 < float(after(tr, "--mem-fraction-static")) < 1
    assert any(d.what == "expected_concurrency" for d in tr.derived)


def test_a_vllm_upgrade_onto_other_gpus_keeps_the_engine_and_moves_the_layout() -> None:
    card = card_from_config(C.QWEN3_235B, name="Qwen3-235B")
    tr = translate(
        "vllm",
        "vllm serve Qwen/Qwen3-235B-A22B -tp 8 --enable-expert-parallel --max-model-len 8192",
        "vllm",
        card=card,
        move=HardwareMove(from_gpu="A100-80G", to_gpu="H200-141G", to_gpus=4),
    )
    assert after(tr, "--tensor-parallel-size") == "4" and "--enable-expert-parallel" in tr.argv


def test_without_a_model_the_move_is_said_not_guessed() -> None:
    tr = translate("vllm", LAUNCH, "sglang", move=HardwareMove(to_gpu="H100-80G", to_gpus=2))
    assert after(tr, "--tp-size") == "4" and any("pass --model" in n for n in tr.notes)


def test_llamacpp_gets_a_gguf_step_slots_that_fit_and_every_layer_on_gpu() -> None:
    card = card_from_config(C.LLAMA_8B, name="Llama-3.1-8B")
    tr = translate("vllm", LAUNCH, "llamacpp", card=card, move=HardwareMove(to_gpu="H100-80G", to_gpus=1))
    assert tr.steps == [
        "python convert_hf_to_gguf.py meta-llama/Llama-3.1-8B-Instruct --outfile "
        "Llama-3.1-8B-Instruct-bf16.gguf --outtype bf16"
    ]
    assert after(tr, "-m") == "Llama-3.1-8B-Instruct-bf16.gguf" and after(tr, "--n-gpu-layers") == "999"
    slots = int(after(tr, "--parallel"))
    assert 1 <= slots <= 64 and int(after(tr, "--ctx-size")) == slots * 8192
    assert {d.what for d in tr.derived} >= {"quantization", "gpu_layers"}


def test_gguf_quantization_follows_the_checkpoint_and_the_memory() -> None:
    awq = card_from_config(
        {**C.LLAMA_8B, "quantization_config": {"quant_method": "awq", "bits": 4, "group_size": 128}}, name="Llama-AWQ"
    )
    tr = translate("vllm", "vllm serve org/Llama-AWQ --max-model-len 4096", "llamacpp", card=awq)
    assert tr.steps[0].endswith("--outtype f16") and tr.steps[1] == (
        "llama-quantize Llama-AWQ-f16.gguf Llama-AWQ-Q4_K_M.gguf Q4_K_M"
    )
    big = card_from_config(C.QWEN3_235B, name="Qwen3-235B")
    small = translate(
        "vllm", "vllm serve Qwen/Qwen3-235B-A22B", "llamacpp", card=big, move=HardwareMove(to_gpu="H100-80G", to_gpus=1)
    )
    assert next(d for d in small.derived if d.what == "quantization").value == "Q4_K_M"


def test_a_gguf_model_needs_no_conversion() -> None:
    tr = translate("vllm", "vllm serve /m/model.gguf --max-model-len 4096", "llamacpp")
    assert tr.steps == [] and after(tr, "-m") == "/m/model.gguf"


def test_a_memory_knob_derived_for_the_new_gpus_is_rendered_as_derived_not_converted_again() -> None:
    """With no memory flag in the launch, the move derives the target's own fraction; it must reach the command line
    unchanged (it was converted a second time, as if it were the source engine's fraction)."""
    card = card_from_config(C.LLAMA_8B, name="Llama-3.1-8B")
    tr = translate(
        "vllm",
        "vllm serve meta-llama/Llama-3.1-8B-Instruct -tp 4 --max-model-len 8192",
        "sglang",
        card=card,
        gpu_total_gib=80.0,
        gpu_name="A100-80G",
        move=HardwareMove(from_gpu="A100-80G", to_gpu="H100-80G", to_gpus=2),
    )
    derived = next(d for d in tr.derived if d.what == "gpu_memory_fraction")
    assert float(after(tr, "--mem-fraction-static")) == derived.value
