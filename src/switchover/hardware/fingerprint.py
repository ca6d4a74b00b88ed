"""Host GPU fingerprint through NVML (nvidia-ml-py, the `gpu` extra); a clear "no GPU" result otherwise."""

from __future__ import annotations

import platform
import re
from typing import Any

from pydantic import BaseModel, Field, field_validator

from switchover.hardware.catalog import CATALOG, GpuSpec, find_gpu
from switchover.inputs import MAX_GIB, MAX_GPUS

_CC = re.compile(r"[0-9]{1,3}(\.[0-9]{1,3})?")


class GpuFingerprint(BaseModel):
    """One GPU as NVML sees it (L2 and bandwidth come from the catalog: NVML does not report them)."""

    index: int
    name: str
    memory_total_mib: int = Field(ge=1, le=MAX_GIB * 1024, description="Total memory as NVML reports it, MiB")
    compute_capability: str | None = Field(default=None, description="e.g. 9.0; None: not reported")
    pcie_gen: int | None = Field(
        default=None,
        description="PCIe generation the link runs at now (it may be lower "
        "than pcie_gen_max while idle); None: not reported",
    )
    pcie_gen_max: int | None = Field(
        default=None, description="Highest PCIe generation possible with this GPU in this system; None: not reported"
    )
    pcie_width: int | None = Field(
        default=None, description="PCIe lanes the link runs with now (it may be fewer while idle); None: not reported"
    )
    pcie_width_max: int | None = Field(
        default=None, description="Most PCIe lanes possible with this GPU in this system; None: not reported"
    )
    nvlink_active_links: int | None = Field(
        default=None, description="Active NVLink links; 0: no NVLink (PCIe only); None: not known"
    )
    power_limit_w: float | None = Field(default=None, description="Power management limit, W; None: not reported")
    mig_enabled: bool | None = Field(default=None, description="MIG mode is on; None: not reported (a GPU without MIG)")
    catalog_name: str | None = Field(default=None, description="matching catalog entry, if any")
    l2_mib: float | None = Field(
        default=None, description="L2 cache, MiB, from the catalog entry; None: no entry, or it does not say"
    )
    bandwidth_gbs: float | None = Field(
        default=None, description="Memory bandwidth, GB/s, from the catalog entry; None: no entry"
    )

    @field_validator("compute_capability")
    @classmethod
    def _cc(cls, value: str | None) -> str | None:
        # ASCII digits only: str.isdigit() also accepts '²', which int() then refuses (a traceback downstream)
        if value is not None and not _CC.fullmatch(value):
            raise ValueError(f"not a compute capability: {value[:20]!r} (e.g. 9.0)")
        return value


class HostFingerprint(BaseModel):
    """What a host offers an inference engine."""

    gpu_present: bool
    reason: str | None = Field(default=None, description="why no GPU was found")
    driver_version: str | None = None
    cuda_driver_version: str | None = None
    nvml_version: str | None = None
    gpus: list[GpuFingerprint] = Field(default_factory=list, max_length=MAX_GPUS)
    host: dict[str, str] = Field(default_factory=dict)


def _host() -> dict[str, str]:
    return {"system": platform.system(), "machine": platform.machine(), "python": platform.python_version()}


def _text(value: Any) -> str:
    return value.decode() if isinstance(value, bytes) else str(value)


def _try(fn: Any, *args: Any) -> Any:
    try:
        return fn(*args)
    except Exception:  # NVML raises NVMLError_NotSupported and friends per query
        return None


def match_catalog(name: str, memory_mib: int) -> GpuSpec | None:
    """Catalog entry for an NVML name, preferring the one whose memory is closest."""
    try:
        return find_gpu(name)
    except Exception:
        pass
    words = name.upper().replace("NVIDIA", "").split()
    candidates = [g for g in CATALOG if words and g.name.split("-")[0] in "".join(words)]
    if not candidates:
        return None
    return min(candidates, key=lambda g: abs(g.memory_mib - memory_mib))


def _nvlink_active(lib: Any, h: Any) -> int | None:
    """Active NVLink links: links are queried until one is out of range. A GPU without NVLink answers the first
    query with NVML_ERROR_NOT_SUPPORTED (0 links); any other failure of the first query leaves the count unknown
    (None), never 0, which would read as "PCIe only"."""
    links = 0
    not_supported = getattr(lib, "NVML_ERROR_NOT_SUPPORTED", 3)
    for link in range(int(getattr(lib, "NVML_NVLINK_MAX_LINKS", 18))):
        try:
            state = lib.nvmlDeviceGetNvLinkState(h, link)
        except Exception as exc:  # NVMLError subclasses carry the NVML return code in .value
            if link == 0 and getattr(exc, "value", None) != not_supported:
                return None
            break
        links += int(bool(state))
    return links


def fingerprint(nvml: Any | None = None) -> HostFingerprint:
    """Query NVML; `nvml` may be injected (tests). Absent library or driver -> gpu_present False with the reason."""
    if nvml is None:
        try:
            import pynvml  # nvidia-ml-py
        except ImportError:
            return HostFingerprint(
                gpu_present=False, host=_host(), reason="nvidia-ml-py is not installed (pip install 'switchover[gpu]')"
            )
        nvml = pynvml
    lib: Any = nvml
    try:
        lib.nvmlInit()
    except Exception as exc:
        return HostFingerprint(gpu_present=False, host=_host(), reason=f"NVML unavailable: {exc}")
    try:
        count = lib.nvmlDeviceGetCount()
        cuda = _try(lib.nvmlSystemGetCudaDriverVersion_v2) or _try(lib.nvmlSystemGetCudaDriverVersion)
        result = HostFingerprint(
            gpu_present=count > 0,
            reason=None if count else "NVML found no GPU",
            host=_host(),
            driver_version=_text(_try(lib.nvmlSystemGetDriverVersion)),
            cuda_driver_version=f"{cuda // 1000}.{cuda % 1000 // 10}" if isinstance(cuda, int) else None,
            nvml_version=_text(_try(lib.nvmlSystemGetNVMLVersion)),
        )
        for i in range(count):
            h = lib.nvmlDeviceGetHandleByIndex(i)
            name = _text(lib.nvmlDeviceGetName(h))
            mem = int(lib.nvmlDeviceGetMemoryInfo(h).total // 2**20)
            cc = _try(lib.nvmlDeviceGetCudaComputeCapability, h)
            links = _nvlink_active(lib, h)
            power = _try(lib.nvmlDeviceGetPowerManagementLimit, h)
            mig = _try(lib.nvmlDeviceGetMigMode, h)
            spec = match_catalog(name, mem)
            result.gpus.append(
                GpuFingerprint(
                    index=i,
                    name=name,
                    memory_total_mib=mem,
                    compute_capability=f"{cc[0]}.{cc[1]}" if cc else None,
                    pcie_gen=_try(lib.nvmlDeviceGetCurrPcieLinkGeneration, h),
                    pcie_gen_max=_try(lib.nvmlDeviceGetMaxPcieLinkGeneration, h),
                    pcie_width=_try(lib.nvmlDeviceGetCurrPcieLinkWidth, h),
                    pcie_width_max=_try(lib.nvmlDeviceGetMaxPcieLinkWidth, h),
                    nvlink_active_links=links,
                    power_limit_w=power / 1000 if isinstance(power, int) else None,
                    mig_enabled=bool(mig[0]) if isinstance(mig, list | tuple) else None,
                    catalog_name=spec.name if spec else None,
                    l2_mib=spec.l2_mib if spec else None,
                    bandwidth_gbs=spec.bandwidth_gbs if spec else None,
                )
            )
        return result
    finally:
        _try(lib.nvmlShutdown)


def fingerprint_from_catalog(name: str, count: int = 1) -> HostFingerprint:
    """A synthetic fingerprint of `count` catalog GPUs, to diff against a real host."""
    spec = find_gpu(name)
    gpus = [
        GpuFingerprint(
            index=i,
            name=spec.name,
            memory_total_mib=spec.memory_mib,
            compute_capability=spec.compute_capability,
            catalog_name=spec.name,
            l2_mib=spec.l2_mib,
            bandwidth_gbs=spec.bandwidth_gbs,
        )
        for i in range(count)
    ]
    return HostFingerprint(gpu_present=True, gpus=gpus, host={"source": f"catalog:{spec.name}"})
