"""The plan and hw commands end to end: exit codes (2 for bad input, 1 for a failed check) and JSON output."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from typer.testing import CliRunner

from switchover.cli.app import app
from switchover.errors import SwitchoverError
from tests.plan import configs as C


class Result:
    """Exit code as `switchover` (main) would return it, plus captured output."""

    def __init__(self, returncode: int, stdout: str, stderr: str) -> None:
        self.returncode, self.stdout, self.stderr = returncode, stdout, stderr


def _run(*args: str) -> Result:
    res = CliRunner().invoke(app, list(args))
    if isinstance(res.exception, SwitchoverError):
        exc = res.exception
        return Result(int(exc.exit_code), res.stdout, f"error: {exc.message}\nhint: {exc.hint}")
    if res.exception is not None and not isinstance(res.exception, SystemExit):
        raise res.exception
    return Result(res.exit_code, res.stdout, "")


@pytest.fixture()
def llama_dir(tmp_path: Path) -> Path:
    d = tmp_path / "llama-8b"
    d.mkdir()
    (d / "config.json").write_text(json.dumps(C.LLAMA_8B))
    return d


def test_malformed_config_exits_2_with_an_explanation(tmp_path: Path) -> None:
    """The one test through the real console script: one line, no traceback."""
    (tmp_path / "config.json").write_text('{"num_hidden_layers": 2,')
    res = subprocess.run(
        [sys.executable, "-m", "switchover", "plan", "capacity", "-m", str(tmp_path), "--gpu", "H100-80G"],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert res.returncode == 2
    assert "malformed JSON at line 1" in res.stderr and "Traceback" not in res.stderr


def test_impossible_plan_exits_2(llama_dir: Path) -> None:
    res = _run("plan", "capacity", "-m", str(llama_dir), "--gpu", "H100-80G", "--tp", "3")
    assert res.returncode == 2
    assert "TP=3 does not divide the 32 attention heads" in res.stderr


def test_unknown_gpu_exits_2(llama_dir: Path) -> None:
    res = _run("plan", "capacity", "-m", str(llama_dir), "--gpu", "H999")
    assert res.returncode == 2 and "unknown GPU 'H999'" in res.stderr and "H100-80G" in res.stderr


def test_capacity_json(llama_dir: Path) -> None:
    res = _run(
        "plan",
        "capacity",
        "-m",
        str(llama_dir),
        "--gpu",
        "H100-80G",
        "--max-model-len",
        "8192",
        "--weights-gib",
        "14.99",
        "--overhead",
        "activation_peak=4.74",
        "--overhead",
        "non_torch=0.13",
        "--memory-fraction",
        "0.9",
        "--json",
    )
    assert res.returncode == 0, res.stderr
    data = json.loads(res.stdout)
    assert data["instance"]["kv_pool_gib"] == pytest.approx(51.4, rel=0.01)
    assert data["binding_limit"] == "kv"


def test_translate_and_grace_commands() -> None:
    res = _run(
        "plan", "translate", "--from", "vllm", "vllm serve m --max-model-len 4096 -tp 2", "--to", "sglang", "--json"
    )
    assert res.returncode == 0, res.stderr
    data = json.loads(res.stdout)
    assert "--tp-size 2" in data["command"] and "--context-length 4096" in data["command"]
    short = _run("plan", "grace", "--max-tokens", "2000", "--tpot-p99-ms", "35", "--client-timeout-s", "10")
    assert short.returncode == 0 and "77 s" in short.stdout and "warning: client timeout 10 s" in short.stdout
    ok = _run("plan", "grace", "--max-tokens", "100", "--tpot-p99-ms", "35", "--json")
    assert ok.returncode == 0 and json.loads(ok.stdout)["need"]["generation_s"] == 3.5


def test_hw_fingerprint_and_diff() -> None:
    res = _run("hw", "fingerprint", "--json")
    assert res.returncode == 0
    assert "gpu_present" in json.loads(res.stdout)
    diff = _run("hw", "diff", "catalog:A100-80G", "catalog:H100-80G", "--json")
    assert diff.returncode == 0 and any(c["field"] == "compute_capability" for c in json.loads(diff.stdout)["changes"])
    assert _run("hw", "diff", "nope.json", "catalog:H100").returncode == 2


def test_capacity_prints_weight_bytes_and_where_they_came_from(tmp_path: Path, llama_dir: Path) -> None:
    awq = tmp_path / "qwq-awq"
    awq.mkdir()
    (awq / "config.json").write_text(
        json.dumps(
            {
                **C.QWQ_32B,
                "quantization_config": {"quant_method": "awq", "bits": 4, "group_size": 128, "zero_point": True},
            }
        )
    )
    quant = _run("plan", "capacity", "-m", str(awq), "--gpu", "H100-80G", "--max-model-len", "8192")
    assert quant.returncode == 0, quant.stderr
    assert "awq 4-bit, group 128" in quant.stdout and "quantization table" in quant.stdout
    plain = _run("plan", "capacity", "-m", str(llama_dir), "--gpu", "H100-80G", "--max-model-len", "8192")
    assert "bf16" in plain.stdout and "16-bit estimate" in plain.stdout  # the estimate and its warning
    (llama_dir / "model.safetensors.index.json").write_text(json.dumps({"metadata": {"total_size": 16_060_522_496}}))
    exact = _run("plan", "capacity", "-m", str(llama_dir), "--gpu", "H100-80G", "--max-model-len", "8192", "--json")
    assert "metadata.total_size" in json.loads(exact.stdout)["weights_source"]


def test_capacity_engine_version_picks_the_overhead_band_and_bad_versions_exit_2(llama_dir: Path) -> None:
    old = _run(
        "plan",
        "capacity",
        "-m",
        str(llama_dir),
        "--gpu",
        "H100-80G",
        "--max-model-len",
        "16000",
        "--engine-version",
        "0.11.0",
        "--json",
    )
    assert old.returncode == 0, old.stderr
    data = json.loads(old.stdout)
    assert data["overhead_model"]["band"] == ">=0.8,<0.19"
    assert data["instance"]["kv_pool_gib"] == pytest.approx(51.38, rel=0.01)  # llm-d's logged pool
    new = _run(
        "plan",
        "capacity",
        "-m",
        str(llama_dir),
        "--gpu",
        "H100-80G",
        "--max-model-len",
        "16000",
        "--engine-version",
        "0.19.0",
        "--json",
    )
    band = json.loads(new.stdout)["overhead_model"]
    assert band["band"] == ">=0.19,<0.21"  # its own sampler coefficient: a smaller peak at 1024 seqs than v0.11
    assert band["sampler_gib"] < data["overhead_model"]["sampler_gib"] / 2
    bad = _run("plan", "capacity", "-m", str(llama_dir), "--gpu", "H100-80G", "--engine-version", "latest")
    assert bad.returncode == 2 and "--engine-version" in bad.stderr


def test_markup_in_config_text_folder_names_and_launch_flags_is_printed_not_parsed(tmp_path: Path) -> None:
    d = tmp_path / "m[bold]"
    d.mkdir()
    (d / "config.json").write_text(json.dumps({**C.LLAMA_8B, "quantization_config": {"quant_method": "[/x]"}}))
    for args in (
        ("plan", "card", "-m", str(d)),
        ("plan", "capacity", "-m", str(d), "--gpu", "H100-80G", "--max-model-len", "4096"),
        ("plan", "translate", "--from", "vllm", "vllm serve M --weird [/x]", "--to", "sglang"),
    ):
        res = _run(*args)
        assert res.returncode in (0, 1), res.stderr
        assert "[/x]" in " ".join(res.stdout.split()).replace("│", "") or "--weird" in res.stdout


def test_parallel_says_when_its_weights_are_a_16_bit_estimate(llama_dir: Path) -> None:
    res = _run("plan", "parallel", "-m", str(llama_dir), "--gpu", "H100-80G", "--gpus", "2", "--max-model-len", "4096")
    assert res.returncode == 0 and "16-bit estimate" in " ".join(res.stdout.split())


@pytest.mark.parametrize("family", ["A100", "a100", "V100"])
def test_a_gpu_family_sold_in_two_memory_sizes_is_never_picked_silently(family: str) -> None:
    from switchover.errors import BadInput
    from switchover.hardware.catalog import find_gpu

    with pytest.raises(BadInput, match="memory sizes") as err:
        find_gpu(family)
    assert "-40G" in err.value.message or "-16G" in err.value.message
    assert find_gpu(f"{family.upper()}-32G" if family == "V100" else "A100-40G").memory_mib > 0


def test_plan_parallel_on_many_gpus_shows_the_best_layouts_and_names_the_request_length() -> None:
    res = CliRunner().invoke(
        app,
        [
            "plan",
            "parallel",
            "-m",
            "builtin:Qwen/Qwen3-32B",
            "--gpu",
            "H100-80G",
            "--gpus",
            "1024",
            "--context",
            "8192",
            "--no-illegal",
        ],
    )
    assert res.exit_code == 0, res.output
    text = " ".join(res.output.split())
    assert "concurrency counts requests of 8,192 tokens (--context)" in text
    assert "more legal layouts, ranked lower (--json lists every one)" in text
    rows = [line for line in res.output.splitlines() if line.startswith("│") and line[1:].strip()[:1].isdigit()]
    assert len(rows) == 30, len(rows)  # the 30 best-ranked layouts; every legal layout was printed before
