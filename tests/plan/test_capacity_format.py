"""`plan capacity` says whether the engine loads the checkpoint's weight format on the GPU, with which kernel,
from the format matrix (engines/data/matrix/formats.yaml), cited; 'unknown' where the matrix has no answer."""

from __future__ import annotations

import json

import pytest

from tests.plan.test_cli import _run

GPT_OSS = "builtin:openai/gpt-oss-120b"
FP8_70B = "builtin:RedHatAI/Llama-3.3-70B-Instruct-FP8-dynamic"


def _format(*args: str) -> dict:
    res = _run("plan", "capacity", *args, "--json")
    assert res.returncode in (0, 1), res.stderr
    return json.loads(res.stdout)["weight_format"]


@pytest.mark.parametrize(
    ("gpu", "loads", "kernel_word"),
    [
        ("H100-80G", True, "Triton"),  # sm90: OpenAI Triton MoE kernels
        ("A100-80G", True, "Marlin"),  # sm80: Marlin weight-only
        ("V100-32G", False, None),  # below vLLM's minimum capability for MXFP4
    ],
)
def test_mxfp4_on_vllm_names_the_kernel_for_the_gpu(gpu: str, loads: bool, kernel_word: str | None) -> None:
    wf = _format("-m", GPT_OSS, "-e", "vllm", "--gpu", gpu)
    assert wf["format"] == "mxfp4" and wf["loads"] is loads and wf["source"]
    if kernel_word:
        assert kernel_word in wf["kernel"]


def test_a_format_that_does_not_load_is_a_warning_in_the_text_output() -> None:
    res = _run("plan", "capacity", "-m", GPT_OSS, "-e", "vllm", "--gpu", "V100-32G")
    assert "the weights do not load here" in res.stdout and "mxfp4" in res.stdout


def test_fp8_weights_name_the_weight_only_path_before_sm89_and_the_source() -> None:
    res = _run("plan", "capacity", "-m", FP8_70B, "-e", "vllm", "--gpu", "A100-80G", "--tp", "2")
    assert res.returncode == 0, res.stderr
    assert "format fp8" in res.stdout and "Marlin" in res.stdout and "source:" in res.stdout


def test_without_a_compute_capability_a_ranged_fact_is_unknown_not_a_guess() -> None:
    wf = _format("-m", GPT_OSS, "-e", "vllm", "--gpu-mem-gib", "80")
    assert wf["loads"] is None and wf["reason"].startswith("unknown")


def test_sixteen_bit_weights_are_named_bf16() -> None:
    wf = _format("-m", "builtin:meta-llama/Llama-3.1-8B-Instruct", "-e", "vllm", "--gpu", "L4-24G")
    assert wf["format"] == "bf16"


@pytest.mark.parametrize(
    ("engine", "loads", "said"),
    [
        ("vllm@0.6.3", False, "0.6.3"),  # fp8 needs sm80 at 0.6.3 (Fp8Config.get_min_capability = 80)
        ("vllm==0.25.1", True, "0.25.1"),  # Marlin weight-only from sm75 at 0.19.0 .. 0.32.0
        ("vllm@0.14.0", None, "0.14.0"),  # between 0.11.0 and 0.19.0, which disagree: unknown, said
    ],
)
def test_the_format_verdict_is_the_pinned_releases(engine: str, loads: bool | None, said: str) -> None:
    wf = _format("-m", FP8_70B, "-e", engine, "--gpu", "T4-16G", "--tp", "8", "--max-model-len", "2048")
    assert wf["loads"] is loads and said in wf["reason"], wf


def test_engine_at_a_release_and_engine_version_must_agree() -> None:
    res = _run(
        "plan",
        "capacity",
        "-m",
        FP8_70B,
        "-e",
        "vllm@0.6.3",
        "--engine-version",
        "0.8.5",
        "--gpu",
        "H100-80G",
        "--tp",
        "2",
    )
    assert res.returncode == 2 and "two releases" in res.stderr
    same = _run(
        "plan",
        "capacity",
        "-m",
        FP8_70B,
        "-e",
        "vllm@0.8.5",
        "--engine-version",
        "0.8.5",
        "--gpu",
        "H100-80G",
        "--tp",
        "2",
        "--max-model-len",
        "8192",
        "--json",
    )
    assert same.returncode == 0 and json.loads(same.stdout)["engine_version"]["version"] == "0.8.5"
