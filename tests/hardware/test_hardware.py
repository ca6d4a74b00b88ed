"""GPU catalog, NVML fingerprint (fake NVML), capability warnings and host diffs."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from switchover.errors import BadInput, ExitCode
from switchover.hardware import check_capabilities, diff_hosts, find_gpu, fingerprint, load_fingerprint


@pytest.mark.parametrize("name", ["H100-80G", "h100", "H100 80GB", "NVIDIA H100 80GB HBM3", "h100-sxm"])
def test_catalog_accepts_names_and_aliases(name: str) -> None:
    assert find_gpu(name).name == "H100-80G"


def test_catalog_facts() -> None:
    h100 = find_gpu("H100-80G")
    assert h100.total_gib == 79.18 and h100.sm == 90
    l4 = find_gpu("L4")
    assert l4.memory_mib == 23034 and l4.total_gib == 22.05  # NVML 22.49 GiB; engines budget from CUDA's 22.05
    assert find_gpu("A100-80G").compute_capability == "8.0"


def test_unknown_gpu_is_bad_input_listing_known_ones() -> None:
    with pytest.raises(BadInput) as info:
        find_gpu("H999")
    assert info.value.exit_code == ExitCode.BAD_INPUT
    assert "H100-80G" in (info.value.hint or "")


def test_no_nvml_library_is_a_clear_no_gpu(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "pynvml", None)  # import fails as if not installed
    fp = fingerprint()
    assert fp.gpu_present is False and "nvidia-ml-py" in (fp.reason or "")
    assert fp.gpus == []


class NVMLError(Exception):
    """pynvml's error: the NVML return code in .value."""

    def __init__(self, value: int) -> None:
        super().__init__(f"NVML error {value}")
        self.value = value


class FakeNVML:
    """The subset of pynvml that fingerprint() calls."""

    NVML_NVLINK_MAX_LINKS = 18

    def __init__(self, init_error: Exception | None = None, nvlink_error: int | None = None) -> None:
        self.init_error = init_error
        self.nvlink_error = nvlink_error  # an NVML return code the NVLink query fails with
        self.shut = False

    def nvmlInit(self) -> None:
        if self.init_error:
            raise self.init_error

    def nvmlShutdown(self) -> None:
        self.shut = True

    def nvmlDeviceGetCount(self) -> int:
        return 2

    def nvmlSystemGetDriverVersion(self) -> str:
        return "550.54.15"

    def nvmlSystemGetCudaDriverVersion_v2(self) -> int:
        return 12040

    def nvmlSystemGetNVMLVersion(self) -> bytes:
        return b"12.550.54.15"

    def nvmlDeviceGetHandleByIndex(self, i: int) -> int:
        return i

    def nvmlDeviceGetName(self, h: int) -> bytes:
        return b"NVIDIA H100 80GB HBM3"

    def nvmlDeviceGetMemoryInfo(self, h: int) -> Any:
        return SimpleNamespace(total=81559 * 2**20)

    def nvmlDeviceGetCudaComputeCapability(self, h: int) -> tuple[int, int]:
        return (9, 0)

    def nvmlDeviceGetNvLinkState(self, h: int, link: int) -> int:
        if self.nvlink_error is not None:
            raise NVMLError(self.nvlink_error)
        if link >= 18:
            raise RuntimeError("not supported")
        return 1

    def nvmlDeviceGetCurrPcieLinkGeneration(self, h: int) -> int:
        return 5 if h == 0 else 4

    def nvmlDeviceGetMaxPcieLinkGeneration(self, h: int) -> int:
        return 5

    def nvmlDeviceGetCurrPcieLinkWidth(self, h: int) -> int:
        return 16

    def nvmlDeviceGetMaxPcieLinkWidth(self, h: int) -> int:
        return 16

    def nvmlDeviceGetPowerManagementLimit(self, h: int) -> int:
        return 700000

    def nvmlDeviceGetMigMode(self, h: int) -> list[int]:
        raise RuntimeError("NVML_ERROR_NOT_SUPPORTED")


def test_fingerprint_reads_every_field_and_matches_the_catalog() -> None:
    nvml = FakeNVML()
    fp = fingerprint(nvml)
    assert fp.gpu_present and fp.driver_version == "550.54.15" and fp.cuda_driver_version == "12.4"
    g = fp.gpus[0]
    assert (g.name, g.memory_total_mib, g.compute_capability) == ("NVIDIA H100 80GB HBM3", 81559, "9.0")
    assert (g.pcie_gen, g.pcie_width, g.nvlink_active_links, g.power_limit_w) == (5, 16, 18, 700.0)
    assert g.catalog_name == "H100-80G" and g.l2_mib == 50 and g.mig_enabled is None
    assert fp.gpus[1].pcie_gen == 4
    assert nvml.shut


@pytest.mark.parametrize(
    ("code", "links"),
    [
        (3, 0),  # NVML_ERROR_NOT_SUPPORTED: a GPU without NVLink
        (2, None),  # NVML_ERROR_INVALID_ARGUMENT on link 0, or any other failure: unknown, not "PCIe only"
        (999, None),
    ],
)
def test_nvlink_count_is_zero_only_when_nvml_says_not_supported(code: int, links: int | None) -> None:
    fp = fingerprint(FakeNVML(nvlink_error=code))
    assert [g.nvlink_active_links for g in fp.gpus] == [links, links]


def test_nvml_init_failure_is_a_clear_no_gpu() -> None:
    fp = fingerprint(FakeNVML(init_error=RuntimeError("Driver Not Loaded")))
    assert not fp.gpu_present and "Driver Not Loaded" in (fp.reason or "")


@pytest.mark.parametrize(
    ("cc", "kwargs", "settings"),
    [
        ("7.0", {"model_dtype": "bfloat16"}, ["dtype"]),
        ("8.0", {"kv_dtype": "fp8"}, ["kv_cache_dtype"]),
        ("8.6", {"quantization": "fp8"}, ["quantization"]),
        ("8.9", {"kv_dtype": "fp8", "quantization": "fp8"}, []),
        ("9.0", {"kv_dtype": "fp8_e5m2"}, []),
        ("7.5", {"model_dtype": "float16"}, []),
    ],
)
def test_capability_warnings(cc: str, kwargs: dict[str, Any], settings: list[str]) -> None:
    got = [w.setting.split()[0] for w in check_capabilities(cc, **kwargs)]
    assert got == settings


def test_an_unknown_compute_capability_says_what_went_unchecked() -> None:
    [w] = check_capabilities(None, model_dtype="bfloat16", kv_dtype="fp8")
    assert w.have == "unknown" and "not checked" in w.consequence
    assert "dtype" in w.setting and "kv_cache_dtype fp8" in w.setting
    assert check_capabilities(None, model_dtype="float16") == []  # nothing that needs a capability was asked


def test_diff_explains_gpu_change(tmp_path: Path) -> None:
    a = fingerprint(FakeNVML())
    path = tmp_path / "a.json"
    path.write_text(a.model_dump_json())
    d = diff_hosts(load_fingerprint(str(path)), load_fingerprint("catalog:A100-80Gx2"))
    fields = {c.field: c for c in d.changes}
    assert "fp8" in fields["compute_capability"].impact and "lost" in fields["compute_capability"].impact
    assert "TPOT" in fields["bandwidth_gbs"].impact
    assert fields["gpu"].a == "NVIDIA H100 80GB HBM3"
    assert "gpu_count" not in fields


def test_identical_hosts_have_no_changes() -> None:
    assert diff_hosts(load_fingerprint("catalog:L4x2"), load_fingerprint("catalog:L4x2")).changes == []


def test_pcie_downgrade_and_count_change_are_reported() -> None:
    a = fingerprint(FakeNVML())
    b = a.model_copy(deep=True)
    b.gpus[0].pcie_gen = 3
    b.gpus = b.gpus[:1]
    fields = {c.field for c in diff_hosts(a, b).changes}
    assert {"pcie", "gpu_count"} <= fields


def test_bad_fingerprint_files_are_bad_input(tmp_path: Path) -> None:
    with pytest.raises(BadInput, match="no such file"):
        load_fingerprint(str(tmp_path / "none.json"))
    (tmp_path / "x.json").write_text(json.dumps({"gpus": "many"}))
    with pytest.raises(BadInput, match="not a fingerprint"):
        load_fingerprint(str(tmp_path / "x.json"))
    with pytest.raises(BadInput, match="unknown GPU"):
        load_fingerprint("catalog:Z9")


def test_fp8_kv_below_sm89_keeps_the_one_byte_pool_and_warns_about_speed() -> None:
    """RTX 3090 logs show a 1-byte KV pool (issue 12 §7): the warning must not halve the planned tokens."""
    [w] = check_capabilities("8.6", kv_dtype="fp8")
    assert "1 byte per element" in w.consequence and "half" not in w.consequence
    assert "fa_utils.py" in w.source


def test_catalog_refs_whose_name_ends_in_x_digits_and_absurd_counts() -> None:
    assert [g.name for g in load_fingerprint("catalog:rtx4090").gpus] == ["RTX4090-24G"]
    assert len(load_fingerprint("catalog:rtx3090x2").gpus) == 2
    with pytest.raises(BadInput, match="GPU count"):
        load_fingerprint("catalog:H100-80Gx" + "9" * 5000)
