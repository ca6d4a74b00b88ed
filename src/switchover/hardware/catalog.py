"""GPU catalog: memory, bandwidth and compute capability of common data-centre GPUs, so plans accept --gpu NAME.

`memory_mib` is what NVML / nvidia-smi reports as memory.total; `cuda_total_gib` is what the CUDA runtime reports
(torch.cuda.mem_get_info), which engines use as "total", where a cited log gives it. Values are vendor datasheet
figures unless a source says otherwise.
"""

from __future__ import annotations

import re

from pydantic import BaseModel, Field

from switchover.errors import BadInput


class GpuSpec(BaseModel):
    """One GPU model."""

    name: str
    aliases: list[str] = Field(default_factory=list)
    memory_mib: int = Field(description="memory.total as NVML reports it")
    cuda_total_gib: float | None = Field(default=None, description="total as the CUDA runtime reports it")
    bandwidth_gbs: float = Field(description="HBM/GDDR bandwidth, GB/s")
    compute_capability: str
    nvlink_gbs: float | None = Field(default=None, description="NVLink bandwidth per GPU (bidirectional), GB/s")
    l2_mib: float | None = None
    source: str

    @property
    def total_gib(self) -> float:
        """Total memory the engines size against: CUDA's figure when known, else NVML's."""
        return self.cuda_total_gib if self.cuda_total_gib is not None else self.memory_mib / 1024

    @property
    def sm(self) -> int:
        """Compute capability as an integer, e.g. 89 for 8.9."""
        major, minor = self.compute_capability.split(".")
        return int(major) * 10 + int(minor)


_DS = "NVIDIA datasheet"
CATALOG: list[GpuSpec] = [
    GpuSpec(
        name="H100-80G",
        aliases=["H100", "H100-SXM", "H100-SXM5-80GB", "NVIDIA H100 80GB HBM3"],
        memory_mib=81559,
        cuda_total_gib=79.18,
        bandwidth_gbs=3350,
        compute_capability="9.0",
        nvlink_gbs=900,
        l2_mib=50,
        source=f"{_DS} (H100 SXM5); cuda_total_gib from llm-d H100 vLLM logs (https://github.com/llm-d/"
        "llm-d-benchmark, config_explorer/empirical-vllm-memory-results.md)",
    ),
    GpuSpec(
        name="H100-PCIe-80G",
        aliases=["H100-PCIE", "NVIDIA H100 PCIe"],
        memory_mib=81559,
        bandwidth_gbs=2000,
        compute_capability="9.0",
        nvlink_gbs=600,
        l2_mib=50,
        source=f"{_DS} (H100 PCIe)",
    ),
    GpuSpec(
        name="H100-NVL-94G",
        aliases=["H100-NVL", "NVIDIA H100 NVL"],
        memory_mib=95830,
        bandwidth_gbs=3900,
        compute_capability="9.0",
        nvlink_gbs=600,
        l2_mib=50,
        source=f"{_DS} (H100 NVL)",
    ),
    GpuSpec(
        name="H200-141G",
        aliases=["H200", "H200-SXM", "NVIDIA H200"],
        memory_mib=143771,
        bandwidth_gbs=4800,
        compute_capability="9.0",
        nvlink_gbs=900,
        l2_mib=50,
        source=f"{_DS} (H200 SXM)",
    ),
    GpuSpec(
        name="GH200-96G",
        aliases=["GH200", "NVIDIA GH200 480GB"],
        memory_mib=97871,
        bandwidth_gbs=4000,
        compute_capability="9.0",
        nvlink_gbs=900,
        l2_mib=50,
        source=f"{_DS} (GH200, 96 GB HBM3)",
    ),
    GpuSpec(
        name="B200-180G",
        aliases=["B200", "NVIDIA B200"],
        memory_mib=183359,
        bandwidth_gbs=8000,
        compute_capability="10.0",
        nvlink_gbs=1800,
        l2_mib=126,
        source=f"{_DS} (HGX B200)",
    ),
    GpuSpec(
        name="A100-80G",
        aliases=["A100-SXM4-80GB", "A100-80GB", "NVIDIA A100-SXM4-80GB"],
        memory_mib=81920,
        cuda_total_gib=79.15,
        bandwidth_gbs=2039,
        compute_capability="8.0",
        nvlink_gbs=600,
        l2_mib=40,
        source=f"{_DS} (A100 80GB SXM); cuda_total_gib: engine logs collected for issue 12 §5",
    ),
    GpuSpec(
        name="A100-40G",
        aliases=["A100-SXM4-40GB", "A100-40GB", "NVIDIA A100-SXM4-40GB"],
        memory_mib=40960,
        cuda_total_gib=39.38,
        bandwidth_gbs=1555,
        compute_capability="8.0",
        nvlink_gbs=600,
        l2_mib=40,
        source=f"{_DS} (A100 40GB SXM); cuda_total_gib: vLLM log total_gpu_memory (39.38GiB) "
        "(https://github.com/vllm-project/vllm/issues/16570; 39.50 in vllm#12330)",
    ),
    GpuSpec(
        name="L40S-48G",
        aliases=["L40S", "NVIDIA L40S"],
        memory_mib=46068,
        cuda_total_gib=44.42,
        bandwidth_gbs=864,
        compute_capability="8.9",
        l2_mib=96,
        source=f"{_DS} (L40S); cuda_total_gib: engine logs collected for issue 12 §5",
    ),
    GpuSpec(
        name="L4-24G",
        aliases=["L4", "NVIDIA L4"],
        memory_mib=23034,
        cuda_total_gib=22.05,
        bandwidth_gbs=300,
        compute_capability="8.9",
        l2_mib=48,
        source=f"{_DS} (L4); cuda_total_gib: torch OOM message 'GPU 0 has a total capacity of 22.05 GiB' on the "
        "L4 of vLLM's CI (https://github.com/vllm-project/vllm/issues/20214)",
    ),
    GpuSpec(
        name="A10G-24G",
        aliases=["A10G", "NVIDIA A10G"],
        memory_mib=23028,
        bandwidth_gbs=600,
        compute_capability="8.6",
        l2_mib=6,
        source="AWS G5 documentation (A10G)",
    ),
    GpuSpec(
        name="A10-24G",
        aliases=["A10", "NVIDIA A10"],
        memory_mib=23028,
        bandwidth_gbs=600,
        compute_capability="8.6",
        l2_mib=6,
        source=f"{_DS} (A10)",
    ),
    GpuSpec(
        name="RTX4090-24G",
        aliases=["RTX4090", "NVIDIA GeForce RTX 4090"],
        memory_mib=24564,
        cuda_total_gib=23.55,
        bandwidth_gbs=1008,
        compute_capability="8.9",
        l2_mib=72,
        source="NVIDIA Ada GPU architecture whitepaper (RTX 4090); cuda_total_gib from a vLLM log: 0.98 x total "
        "= weights 13.95 + non-torch 0.25 + activation 0.19 + KV 8.69 GiB "
        "(https://github.com/vllm-project/vllm/issues/13061)",
    ),
    GpuSpec(
        name="RTX3090-24G",
        aliases=["RTX3090", "NVIDIA GeForce RTX 3090"],
        memory_mib=24576,
        cuda_total_gib=23.58,
        bandwidth_gbs=936,
        compute_capability="8.6",
        l2_mib=6,
        source="NVIDIA Ampere GA102 whitepaper (RTX 3090); cuda_total_gib: vLLM log total_gpu_memory=23.58GiB "
        "(https://github.com/vllm-project/vllm/issues/10517)",
    ),
    GpuSpec(
        name="T4-16G",
        aliases=["T4", "Tesla T4"],
        memory_mib=15360,
        bandwidth_gbs=320,
        compute_capability="7.5",
        l2_mib=4,
        source=f"{_DS} (T4)",
    ),
    GpuSpec(
        name="V100-32G",
        aliases=["V100-SXM2-32GB", "V100-32GB", "Tesla V100-SXM2-32GB"],
        memory_mib=32768,
        bandwidth_gbs=900,
        compute_capability="7.0",
        nvlink_gbs=300,
        l2_mib=6,
        source=f"{_DS} (V100 SXM2)",
    ),
    GpuSpec(
        name="V100-16G",
        aliases=["V100-SXM2-16GB", "Tesla V100-SXM2-16GB"],
        memory_mib=16384,
        bandwidth_gbs=900,
        compute_capability="7.0",
        nvlink_gbs=300,
        l2_mib=6,
        source=f"{_DS} (V100 SXM2)",
    ),
]


def _norm(name: str) -> str:
    return re.sub(r"[^a-z0-9]", "", name.lower()).replace("gb", "g")


def gpu_names() -> list[str]:
    """Catalog names, in catalog order."""
    return [g.name for g in CATALOG]


def find_gpu(name: str) -> GpuSpec:
    """The catalog entry for a name or alias (case and punctuation ignored); BadInput listing known names."""
    key = _norm(name)
    for gpu in CATALOG:
        if key in {_norm(n) for n in [gpu.name, *gpu.aliases]}:
            return gpu
    sizes = [gpu.name for gpu in CATALOG if _norm(gpu.name.rsplit("-", 1)[0]) == key]
    if len(sizes) > 1:  # a family sold with several memory sizes: never pick one silently
        raise BadInput(
            f"GPU {name!r} comes in {len(sizes)} memory sizes: name one of {', '.join(sizes)}",
            hint="the memory size decides the KV pool; or pass --gpu-mem-gib",
        )
    raise BadInput(f"unknown GPU {name!r}", hint=f"known GPUs: {', '.join(gpu_names())}; or pass --gpu-mem-gib")
