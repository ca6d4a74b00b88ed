"""The GPU thresholds of the weight-format matrix that were read in the engines' source (SGLang 0.5.23, TGI
db931fcf42, TensorRT-LLM stored files, llama.cpp ggml-cuda, vLLM 0.32.0): one lookup on each side of every
threshold, so an edit that moves a bound or drops a rule shows up here next to the function it was read in."""

from __future__ import annotations

import pytest

from switchover.engines.formats import load_matrix, lookup


@pytest.mark.parametrize(
    ("engine", "fmt", "sm", "loads", "kernel_has"),
    [
        ("sglang", "bf16", 70, False, None),  # load_model_utils.maybe_downgrade_dtype_for_legacy_gpu: sm75 and above
        ("sglang", "bf16", 75, True, "16-bit"),
        ("sglang", "fp8", 75, False, None),  # Fp8Config.get_min_capability -> 80
        ("sglang", "fp8", 86, True, "Marlin"),  # fp8_utils.can_auto_enable_marlin_fp8: 80 <= sm < 89
        ("sglang", "fp8", 89, True, "W8A8"),
        ("sglang", "gptq", 75, False, None),  # Marlin has no types below sm80; plain gptq is not a CUDA method
        ("sglang", "gptq", 80, True, "Marlin"),
        ("sglang", "awq", 75, True, "dequantize"),  # AWQConfig.get_min_capability -> 75, AWQ Marlin from sm80
        ("sglang", "awq", 80, True, "Marlin"),
        ("sglang", "wna16", 75, False, None),  # CompressedTensorsWNA16.get_min_capability -> 80
        ("sglang", "int8_w8a8", 75, False, None),  # CompressedTensorsW8A8Int8.get_min_capability -> 80
        ("sglang", "nvfp4", 90, True, "Marlin"),  # fp4_utils.initialize_fp4_gemm_config: marlin for sm80-99
        ("sglang", "nvfp4", 100, True, "W4A4"),
        ("sglang", "mxfp4", 75, False, None),  # Mxfp4Config.get_min_capability -> 80
        ("sglang", "mxfp4", 90, True, "Triton"),  # model_overrides/gpt_oss.py
        ("sglang", "mxfp4", 100, True, "FlashInfer"),
        ("sglang", "mxfp4", 120, True, "CUTLASS"),
        (
            "sglang",
            "bitsandbytes",
            70,
            False,
            None,
        ),  # maybe_downgrade_dtype_for_legacy_gpu, before the quant config's 70
        ("sglang", "bitsandbytes", 75, True, "bitsandbytes"),
        ("sglang", "gguf", 70, False, None),  # the same sm75 check, before GGUFConfig.get_min_capability's 60
        ("sglang", "gguf", 75, True, "GGUF"),
        ("tgi", "fp8", 89, True, "Marlin"),  # layers/fp8.py get_fp8_linear: Marlin on every major 8
        ("tgi", "fp8", 90, True, "W8A8"),
        ("tgi", "bf16", 80, True, "16-bit"),  # Dockerfile TORCH_CUDA_ARCH_LIST starts at 8.0
        ("tgi", "awq", 75, False, None),  # marlin/gptq.py can_use_gptq_marlin: has_sm_8_0; AWQ GEMM built for 8.0+
        ("tgi", "awq", 80, True, "Marlin"),
        ("tgi", "gptq", 75, False, None),  # has_sm_8_0, gptq/__init__.py CAN_EXLLAMA = major >= 8
        ("tgi", "gptq", 80, True, "Marlin"),
        ("trtllm", "fp8", 86, False, None),  # linear.py: every FP8 method is W8A8
        ("trtllm", "nvfp4", 90, False, None),  # linear.py NVFP4LinearMethod is W4A4; FP4 GEMM tiles for SM100/SM120
        ("trtllm", "mxfp4", 90, True, "W4A16"),  # model_config.py get_mxfp4_quant_algo / resolve_moe_backend
        ("trtllm", "mxfp4", 100, True, "MXFP8"),
        ("trtllm", "bf16", 75, None, None),  # not in the support matrix: unknown, not a guess
        ("trtllm", "awq", 90, False, None),  # llm_utils.py _update_from_hf_quant_config: no awq branch, raises
        ("trtllm", "gptq", 90, False, None),  # the same; linear.py get_quant_method has no GPTQ method either
        ("llamacpp", "gguf", 61, True, "dp4a"),  # ggml-cuda mmq.cu: Turing MMA from sm75, __dp4a before
        ("llamacpp", "gguf", 75, True, "tensor cores"),
        ("vllm", "gptq", 70, False, None),  # AutoGPTQLinearMethod.__init__: verify_marlin_supported needs sm75
        ("vllm", "gptq", 50, False, None),  # AutoGPTQConfig.get_min_capability = 60
    ],
)
def test_thresholds_read_in_the_source(
    engine: str, fmt: str, sm: int, loads: bool | None, kernel_has: str | None
) -> None:
    v = lookup(engine, fmt, "cuda", sm)
    assert v.loads is loads, v.reason
    if kernel_has:
        assert v.kernel and kernel_has in v.kernel, v.kernel


def test_unverified_rules_say_what_was_not_read() -> None:
    unverified = [r for r in load_matrix().rules if not r.verified]
    assert all(r.note and "not" in r.note for r in unverified), [(r.engine, r.format, r.sm_range) for r in unverified]
