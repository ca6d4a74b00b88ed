"""Weight-format matrix and driver/CUDA compatibility data: validation on load (errors name the field), lookups,
checkpoint format naming, build-vs-host checks, and `hw diff --engine/--model/--migration`."""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

import pytest
import yaml
from typer.testing import CliRunner

from switchover.cli.app import app
from switchover.engines.compat import CompatData, EnginePin, check_engine, driver_support, load_compat, parse_pin
from switchover.engines.formats import ENGINES, FormatMatrix, format_of_config, load_matrix, lookup
from switchover.engines.matrixfile import validated
from switchover.errors import BadInput, SwitchoverError
from switchover.hardware.diff import kernel_changes, load_fingerprint
from switchover.hardware.fingerprint import fingerprint_from_catalog
from switchover.quantization import method_table

runner = CliRunner()


def _exit_code(argv: list[str]) -> tuple[int, str]:
    """The exit code `switchover` (main) returns, and the error line or output."""
    res = runner.invoke(app, argv)
    if isinstance(res.exception, SwitchoverError):
        return int(res.exception.exit_code), res.exception.message
    if res.exception is not None and not isinstance(res.exception, SystemExit):
        raise res.exception
    return res.exit_code, res.output


def _matrix_data() -> dict[str, Any]:
    return copy.deepcopy(load_matrix().model_dump())


def _compat_data() -> dict[str, Any]:
    return copy.deepcopy(load_compat().model_dump())


# ---- the matrix as data ----------------------------------------------------------------------------------------


def test_packaged_matrix_cites_every_rule_and_names_real_quant_methods() -> None:
    m = load_matrix()
    assert {r.engine for r in m.rules} == set(ENGINES)
    assert all(r.source.strip() for r in m.rules)
    assert any(not r.verified for r in m.rules) and any(r.verified for r in m.rules)
    known = set(method_table()["methods"]) | set(method_table()["aliases"])
    assert all(set(spec.quant_methods) <= known for spec in m.formats.values())


@pytest.mark.parametrize(
    ("mutate", "field"),
    [
        (lambda d: d["rules"][0].update(source=" "), "rules.0.source"),
        (lambda d: d["rules"][0].pop("verified"), "rules.0.verified"),
        (lambda d: d["rules"][0].update(engine="vllm2"), "rules.0.engine"),
        (lambda d: d["rules"][0].update(format="int3"), "rules.0.format"),
        (lambda d: d["rules"][0].update(sm_min=90, sm_max=80), "rules.0"),
        (lambda d: d["rules"][0].update(device="tpu"), "rules.0.device"),
        (lambda d: d["rules"].append(dict(d["rules"][0])), f"rules.{len(load_matrix().rules)}: overlaps rules.0"),
        (lambda d: d["formats"]["fp8"]["quant_methods"].append("fp7"), "formats.fp8.quant_methods"),
        (lambda d: d["rules"][0].update(kernel=None, loads=True), "rules.0"),
        (
            lambda d: d["formats"]["awq"].update(
                names=[{"method": "modelopt", "algo_contains": "awq", "how": "x"}], names_source="s"
            ),
            "formats.awq.names: modelopt is not in",
        ),
        (lambda d: d["formats"]["fp8"].pop("names_source"), "formats.fp8.names: no names_source"),
        (lambda d: d["formats"]["fp8"]["names"][0].update(activations="some"), "formats.fp8.names.0.activations"),
    ],
)
def test_matrix_validation_names_the_field(mutate: Any, field: str) -> None:
    data = _matrix_data()
    mutate(data)
    with pytest.raises(BadInput) as exc:
        validated(FormatMatrix, data, "formats.yaml")
    assert field in exc.value.message


@pytest.mark.parametrize(
    ("engine", "fmt", "device", "sm", "loads", "kernel_has"),
    [
        ("vllm", "fp8", "cuda", 80, True, "Marlin"),  # FP8 weight-only on Ampere
        ("vllm", "fp8", "cuda", 89, True, "W8A8"),  # fp8 tensor cores from Ada
        ("vllm", "fp8", "cuda", 90, True, "W8A8"),
        ("vllm", "fp8", "cuda", 70, False, None),  # below Fp8Config.get_min_capability
        ("vllm", "mxfp4", "cuda", 80, True, "Marlin"),
        ("vllm", "mxfp4", "cuda", 90, True, "Triton"),
        ("vllm", "mxfp4", "cuda", 100, True, "FlashInfer"),
        ("vllm", "mxfp4", "cuda", 75, False, None),
        ("vllm", "nvfp4", "cuda", 90, True, "Marlin"),
        ("vllm", "nvfp4", "cuda", 100, True, "W4A4"),
        ("vllm", "wna16", "cuda", 90, True, "Machete"),
        ("vllm", "awq", "cuda", 86, True, "Marlin"),
        ("vllm", "gguf", "cuda", 90, False, None),
        ("vllm", "bitsandbytes", "cuda", 90, False, None),
        ("vllm", "bf16", "cpu", None, True, "CPU"),
        ("llamacpp", "gguf", "cpu", None, True, "ggml"),
        ("llamacpp", "bf16", "cuda", 90, False, None),  # the engine's '*' rule: GGUF only
        ("llamacpp", "fp8", "cpu", None, False, None),
        ("trtllm", "nvfp4", "cuda", 100, True, "NVFP4"),
        ("trtllm", "bf16", "cpu", None, False, None),
        ("tgi", "mxfp4", "cuda", 90, None, None),  # no fact: unknown, not a guess
        ("sglang", "bf16", "cpu", None, None, None),
    ],
)
def test_lookup_table(
    engine: str, fmt: str, device: Any, sm: int | None, loads: bool | None, kernel_has: str | None
) -> None:
    v = lookup(engine, fmt, device, sm)
    assert v.loads is loads, v.reason
    if kernel_has:
        assert v.kernel and kernel_has in v.kernel
    if loads is None:
        assert v.reason.startswith("unknown") and v.source is None
    else:
        assert v.source


def test_an_unknown_compute_capability_leaves_ranged_facts_unknown() -> None:
    assert lookup("vllm", "fp8", "cuda", None).loads is None
    assert lookup("vllm", "bitsandbytes", "cuda", None).loads is False  # a rule without a range still answers


@pytest.mark.parametrize(
    ("qc", "fmt"),
    [
        (None, "bf16"),
        ({}, "bf16"),
        ({"quant_method": "fp8", "weight_block_size": [128, 128]}, "fp8"),
        ({"quant_method": "fbgemm_fp8"}, "fp8"),
        ({"quant_method": "awq", "bits": 4, "group_size": 128}, "awq"),
        ({"quant_method": "gptq", "bits": 4, "group_size": 128}, "gptq"),
        ({"quant_method": "mxfp4"}, "mxfp4"),
        ({"load_in_4bit": True}, "bitsandbytes"),
        (
            {
                "quant_method": "compressed-tensors",
                "config_groups": {"g": {"weights": {"num_bits": 8, "type": "float", "strategy": "channel"}}},
            },
            "fp8",
        ),
        (
            {
                "quant_method": "compressed-tensors",
                "config_groups": {
                    "g": {"weights": {"num_bits": 4, "type": "int", "strategy": "group", "group_size": 128}}
                },
            },
            "wna16",
        ),
        (
            {
                "quant_method": "compressed-tensors",
                "config_groups": {
                    "g": {
                        "weights": {"num_bits": 8, "type": "int", "strategy": "channel"},
                        "input_activations": {"num_bits": 8, "type": "int"},
                    }
                },
            },
            "int8_w8a8",
        ),
        (
            {
                "quant_method": "compressed-tensors",
                "config_groups": {
                    "g": {"weights": {"num_bits": 4, "type": "float", "strategy": "tensor_group", "group_size": 16}}
                },
            },
            "nvfp4",
        ),
        ({"quant_method": "modelopt", "quant_algo": "FP8"}, "fp8"),
        ({"quant_method": "modelopt", "quant_algo": "NVFP4"}, "nvfp4"),
        ({"quant_method": "modelopt", "quant_algo": "W4A8_AWQ"}, None),
        ({"quant_method": "hqq"}, None),
        ({"quant_method": "w8a8_int8"}, "int8_w8a8"),  # SGLang's own int8 checkpoints
        ({"quant_method": "modelopt", "quant_algo": "W4A8_NVFP4_FP8"}, "nvfp4"),  # 4-bit weights: fp4 wins over fp8
        ({"quant_method": "modelopt", "quant_algo": "MXFP8"}, "fp8"),
    ],
)
def test_checkpoint_format_from_quantization_config(qc: Any, fmt: str | None) -> None:
    got, why = format_of_config(qc)
    assert got == fmt, why
    assert why


# ---- compatibility data -----------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("mutate", "field"),
    [
        (lambda d: d["builds"][0].update(cuda="twelve"), "builds.0.cuda"),
        (lambda d: d["builds"][0].update(engine="ollama"), "builds.0.engine"),
        (lambda d: d["builds"][0].update(versions=">=x"), "builds.0.versions"),
        (lambda d: d["builds"][0].update(source=""), "builds.0.source"),
        (lambda d: d["builds"][0].update(cuda="9.2"), "builds.0.cuda"),  # no CUDA 9 family
        (lambda d: d["cuda_families"][0].update(min_driver="latest"), "cuda_families.0.min_driver"),
        (lambda d: d["cuda_toolkits"][0].pop("verified"), "cuda_toolkits.0.verified"),
    ],
)
def test_compat_validation_names_the_field(mutate: Any, field: str) -> None:
    data = _compat_data()
    mutate(data)
    with pytest.raises(BadInput) as exc:
        validated(CompatData, data, "compat.yaml")
    assert field in exc.value.message


@pytest.mark.parametrize(
    ("pin", "driver", "ccs", "status"),
    [
        ("vllm==0.21.0", "580.65.06", ["9.0"], "ok"),
        ("vllm==0.21.0", "560.35.03", ["9.0"], "degraded"),  # CUDA 12.x minor-version compatibility, below 575.51.03
        ("vllm==0.21.0", "470.82.01", ["9.0"], "fails"),  # below the CUDA 12 family minimum
        ("vllm==0.21.0", "580.65.06", ["7.0"], "fails"),  # sm70: no kernels in this build
        ("vllm==0.11.0", "580.65.06", ["7.0"], "ok"),  # 0.11.0 still shipped sm70
        ("vllm==0.21.0", None, ["9.0"], "unknown"),  # a catalog host has no driver
        ("vllm==0.0.1", "580.65.06", ["9.0"], "unknown"),  # no build data
        ("vllm", "580.65.06", ["9.0"], "unknown"),  # no version pinned
        ("tgi==3.3.6", "550.54.15", ["8.9"], "ok"),
        ("tgi==3.3.6", "550.54.15", ["7.5"], "fails"),  # TORCH_CUDA_ARCH_LIST starts at 8.0
    ],
)
def test_build_against_host(pin: str, driver: str | None, ccs: list[str], status: str) -> None:
    findings = check_engine(parse_pin(pin), driver, ccs, True)
    assert [f.status for f in findings] == [status], findings[0].message
    assert findings[0].message


def test_a_version_with_several_builds_is_checked_per_build() -> None:
    findings = check_engine(parse_pin("vllm==0.18.0"), "575.51.03", ["9.0"], True)
    assert {(f.build_cuda, f.status) for f in findings} == {("12.8", "ok"), ("12.9", "ok"), ("13.0", "fails")}
    assert [f.default_build for f in findings].count(True) == 1


def test_no_gpu_host_cannot_run_a_cuda_build() -> None:
    (f,) = check_engine(EnginePin(engine="vllm", version="0.21.0"), "580.65.06", [], False)
    assert f.status == "unknown" and "no GPU" in f.message


@pytest.mark.parametrize("text", ["", "==0.1", "vllm==abc", "nosuchengine==1.0"])
def test_bad_engine_pins_are_bad_input(text: str) -> None:
    with pytest.raises(BadInput):
        parse_pin(text)


def test_driver_support_names_families_and_the_full_toolkit() -> None:
    text = driver_support("570.124.06") or ""
    assert "12.x" in text and "13.x" not in text and "up to CUDA 12.8" in text
    assert driver_support(None) is None
    assert "below every" in (driver_support("400.1") or "")


# ---- hw diff ---------------------------------------------------------------------------------------------------


def test_kernel_changes_say_which_kernel_replaces_which() -> None:
    a, b = fingerprint_from_catalog("A100-80G"), fingerprint_from_catalog("H100-80G")
    (vllm,) = kernel_changes("fp8", ["vllm"], a, b, "a100", "h100")
    assert vllm.a_loads and vllm.b_loads and "Marlin" in (vllm.a_kernel or "") and "W8A8" in (vllm.b_kernel or "")
    assert "will load with" in vllm.message and "instead of" in vllm.message
    (trt,) = kernel_changes("nvfp4", ["trtllm"], b, a, "h100", "a100")
    assert trt.b_loads is False and "will not load" in trt.message


def _fp_file(tmp_path: Path, driver: str | None, cc: str = "9.0") -> str:
    fp = fingerprint_from_catalog("H100-80G").model_copy(update={"driver_version": driver})
    fp.gpus[0].compute_capability = cc
    path = tmp_path / "b.json"
    path.write_text(fp.model_dump_json())
    return str(path)


def test_hw_diff_warns_when_a_pinned_engine_cannot_run_on_b(tmp_path: Path) -> None:
    b = _fp_file(tmp_path, "470.82.01")
    res = runner.invoke(app, ["hw", "diff", "catalog:A100-80G", b, "--engine", "vllm==0.21.0", "--json"])
    assert res.exit_code == 1, res.output  # a check failed: the JSON is printed, then exit 1
    data = json.loads(res.stdout)
    assert [f["status"] for f in data["engines"]] == ["fails"]
    text = runner.invoke(app, ["hw", "diff", "catalog:A100-80G", b, "--engine", "vllm==0.21.0"]).output
    assert "FAILS: vllm 0.21.0" in text and "source: https://docs.nvidia.com" in text


def test_hw_diff_with_a_model_reports_the_kernel_change(tmp_path: Path) -> None:
    res = runner.invoke(
        app,
        ["hw", "diff", "catalog:A100-80G", "catalog:B200", "-m", "builtin:openai/gpt-oss-120b", "-e", "vllm", "--json"],
    )
    assert res.exit_code == 0, res.output
    data = json.loads(res.output)
    (k,) = data["kernels"]
    assert k["format"] == "mxfp4" and "Marlin" in k["a_kernel"] and "FlashInfer" in k["b_kernel"]
    assert data["engines"][0]["status"] == "unknown"  # -e vllm without a version: said, not assumed


def test_hw_diff_reads_the_new_engine_from_the_migration_file(tmp_path: Path) -> None:
    mig = tmp_path / "switchover.yaml"
    mig.write_text(
        yaml.safe_dump(
            {
                "old": {"url": "http://127.0.0.1:8001", "engine": "vllm"},
                "new": {"url": "http://127.0.0.1:8002", "engine": "sglang"},
            }
        )
    )
    res = runner.invoke(app, ["hw", "diff", "catalog:A100-80G", "catalog:H100-80G", "--migration", str(mig), "--json"])
    assert res.exit_code == 0, res.output
    (f,) = json.loads(res.output)["engines"]
    assert f["engine"] == "sglang" and f["status"] == "unknown" and "no version pinned" in f["message"]


@pytest.mark.parametrize(
    "argv",
    [
        ["--engine", "vllm==x.y"],
        ["--engine", "ollama"],
        ["-m", "builtin:no/such-model"],
        ["--migration", "/nonexistent/switchover.yaml"],
    ],
)
def test_hw_diff_bad_input_is_exit_2(argv: list[str]) -> None:
    code, text = _exit_code(["hw", "diff", "catalog:A100-80G", "catalog:H100-80G", *argv])
    assert code == 2, text
    assert "\n" not in text.strip()


def test_fingerprint_prints_the_driver_and_which_cuda_builds_it_runs(monkeypatch: pytest.MonkeyPatch) -> None:
    from switchover.cli import hw_cmd
    from switchover.hardware.fingerprint import fingerprint
    from tests.hardware.test_hardware import FakeNVML

    fp = fingerprint(FakeNVML())
    monkeypatch.setattr(hw_cmd, "fingerprint", lambda: fp)
    res = runner.invoke(app, ["hw", "fingerprint"])
    assert res.exit_code == 0, res.output
    assert f"driver {fp.driver_version}" in res.output
    assert (driver_support(fp.driver_version) or "?")[:40] in res.output


def test_a_fingerprint_with_a_non_ascii_compute_capability_is_bad_input(tmp_path: Path) -> None:
    b = _fp_file(tmp_path, "570.124.06", cc="\u00b2.0")  # '²'.isdigit() is True, int('²') raises
    with pytest.raises(BadInput, match=r"compute_capability: .*not a compute capability"):
        load_fingerprint(b)


@pytest.mark.parametrize(
    ("update", "field"),
    [({"memory_total_mib": -5}, "memory_total_mib"), ({"memory_total_mib": 10**30}, "memory_total_mib")],
)
def test_a_fingerprint_with_impossible_gpu_memory_is_bad_input(
    tmp_path: Path, update: dict[str, int], field: str
) -> None:
    fp = fingerprint_from_catalog("H100-80G")
    fp.gpus[0] = fp.gpus[0].model_copy(update=update)
    path = tmp_path / "fp.json"
    path.write_text(fp.model_dump_json())
    with pytest.raises(BadInput, match=field):
        load_fingerprint(str(path))


def test_a_fingerprint_with_more_gpus_than_any_host_is_bad_input(tmp_path: Path) -> None:
    fp = fingerprint_from_catalog("H100-80G")
    path = tmp_path / "fp.json"
    path.write_text(fp.model_copy(update={"gpus": fp.gpus * 5000}).model_dump_json())
    with pytest.raises(BadInput, match="gpus"):
        load_fingerprint(str(path))


@pytest.mark.parametrize(
    ("cc", "sm"),
    [("9.0", 90), ("8.6", 86), ("12.0", 120), ("10", 100), (None, None), ("", None), ("9.x", None), ("\u00b2.0", None)],
)
def test_one_compute_capability_parser_for_hw_diff_choose_and_capacity(cc: str | None, sm: int | None) -> None:
    from switchover.engines.compat import sm_of

    assert sm_of(cc) == sm


def test_the_matrix_engines_are_the_engines_with_a_profile() -> None:
    from switchover.engines.profile import list_profiles

    assert sorted(ENGINES) == list_profiles()  # a profile added or renamed must reach the matrices too
