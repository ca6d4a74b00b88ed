"""`hw diff` keeps the exit-code contract (1 when something FAILS), picks the kernel rules of the engine release it is
given (the format matrix is read at some releases; a release no rule covers is unknown, said), and tells fp16
checkpoints from bf16 ones (issue 21)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from switchover.cli.app import app
from switchover.engines.compat import format_rules_at, lookup_at
from switchover.errors import SwitchoverError
from switchover.hardware.fingerprint import fingerprint_from_catalog
from tests.plan import configs as C

runner = CliRunner()


def _code(argv: list[str]) -> tuple[int, str]:
    res = runner.invoke(app, argv)
    if isinstance(res.exception, SwitchoverError):
        return int(res.exception.exit_code), res.stdout
    assert res.exception is None or isinstance(res.exception, SystemExit), res.exception
    return res.exit_code, res.stdout


def _host(tmp_path: Path, driver: str) -> str:
    fp = fingerprint_from_catalog("H100-80G").model_copy(update={"driver_version": driver})
    path = tmp_path / f"host-{driver}.json"
    path.write_text(fp.model_dump_json())
    return str(path)


def _model(tmp_path: Path, name: str, config: dict[str, Any]) -> str:
    folder = tmp_path / name
    folder.mkdir()
    (folder / "config.json").write_text(json.dumps(config))
    return str(folder)


def test_a_build_that_fails_on_b_exits_1_with_and_without_json(tmp_path: Path) -> None:
    b = _host(tmp_path, "470.82.01")  # below CUDA 12.x's minimum driver
    for extra in ([], ["--json"]):
        code, out = _code(["hw", "diff", "catalog:A100-80G", b, "--engine", "vllm@0.21.0", *extra])
        assert code == 1, out
    code, out = _code(["hw", "diff", "catalog:A100-80G", _host(tmp_path, "580.65.06"), "--engine", "vllm@0.21.0"])
    assert code == 0 and "OK: vllm 0.21.0" in out, out


def test_a_checkpoint_the_named_engine_cannot_load_on_b_exits_1(tmp_path: Path) -> None:
    fp8 = {**C.LLAMA_8B, "quantization_config": {"quant_method": "fp8"}}
    model = _model(tmp_path, "fp8", fp8)
    code, out = _code(["hw", "diff", "catalog:H100-80G", "catalog:T4", "-m", model, "-e", "vllm@0.11.0"])
    assert code == 1 and "FAILS: kernel: vllm" in out, out
    code, _ = _code(["hw", "diff", "catalog:H100-80G", "catalog:T4", "-m", model])  # no engine named: a survey
    assert code == 0


@pytest.mark.parametrize(
    ("version", "loads", "kernel_word"),
    [
        ("0.6.3", True, "bitsandbytes"),  # QUANTIZATION_METHODS has bitsandbytes at 0.6.3
        ("0.25.1", True, "bitsandbytes"),
        ("0.32.0", False, None),  # gone by 0.32.0 (the release formats.yaml was read at)
        (None, False, None),  # no release: the newest known
        ("0.28.0", None, None),  # between 0.25.1 (present) and 0.32.0 (absent): not read, unknown
    ],
)
def test_kernel_rules_are_the_pinned_releases(version: str | None, loads: bool | None, kernel_word: str | None) -> None:
    v = lookup_at("vllm", "bitsandbytes", "cuda", 90, version)
    assert v.loads is loads, v.reason
    assert kernel_word is None or kernel_word in (v.kernel or "").lower()
    if loads is None:
        assert "0.28.0" in v.reason and "unknown" in v.reason


def test_hw_diff_picks_the_rules_of_the_pinned_vllm(tmp_path: Path) -> None:
    """Issue 21: `hw diff --engine vllm==0.6.3` read vLLM 0.32's rules (an fp8 checkpoint on an A100 loads with Marlin
    from 0.19 on; at 0.6.3 it needs sm80 and loads with the Marlin W8A16 path too, on a T4 it is refused)."""
    fp8 = _model(tmp_path, "fp8", {**C.LLAMA_8B, "quantization_config": {"quant_method": "fp8"}})
    old = json.loads(
        runner.invoke(
            app, ["hw", "diff", "catalog:H100-80G", "catalog:T4", "-m", fp8, "-e", "vllm@0.6.3", "--json"]
        ).stdout
    )
    new = json.loads(
        runner.invoke(
            app, ["hw", "diff", "catalog:H100-80G", "catalog:T4", "-m", fp8, "-e", "vllm@0.25.1", "--json"]
        ).stdout
    )
    assert old["kernels"][0]["b_loads"] is False and "0.6.3" in old["kernels"][0]["message"]
    assert new["kernels"][0]["b_loads"] is True and "Marlin" in new["kernels"][0]["b_kernel"]


def test_every_boundary_release_gives_a_consistent_matrix() -> None:
    """The ranged rules of one release never overlap (the matrix validator runs on the rules that hold there)."""
    for version in (
        "0.4.1",
        "0.4.2",
        "0.5.0",
        "0.5.1",
        "0.5.3",
        "0.5.5",
        "0.6.3",
        "0.8.5",
        "0.11.0",
        "0.19.0",
        "0.21.0",
        "0.25.1",
        "0.31.9",
        "0.32.0",
        "0.40.0",
    ):
        matrix, _ = format_rules_at("vllm", version)
        assert all(r.engine != "vllm" or r.format for r in matrix.rules)


def test_an_fp16_checkpoint_is_not_called_bf16(tmp_path: Path) -> None:
    fp16 = _model(tmp_path, "fp16", {**C.LLAMA_8B, "torch_dtype": "float16"})
    bf16 = _model(tmp_path, "bf16", C.LLAMA_8B)
    for model, label in ((fp16, "fp16"), (bf16, "bf16")):
        data = json.loads(
            runner.invoke(
                app, ["hw", "diff", "catalog:A100-80G", "catalog:T4", "-m", model, "-e", "vllm@0.11.0", "--json"]
            ).stdout
        )
        (k,) = data["kernels"]
        assert k["format"] == label and f"this {label} checkpoint" in k["message"], k
        assert ("served as fp16" in k["message"]) is (label == "bf16")  # T4 is sm75: no bf16


def test_an_unpinned_engine_is_the_newest_known_and_said(tmp_path: Path) -> None:
    data = json.loads(
        runner.invoke(app, ["hw", "diff", "catalog:A100-80G", "catalog:H100-80G", "-e", "sglang", "--json"]).stdout
    )
    (f,) = data["engines"]
    assert "no version pinned" in f["message"] and "newest known" in f["message"]
