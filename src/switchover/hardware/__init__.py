"""Hardware: GPU catalog, NVML fingerprint, capability checks and host diffs."""

from switchover.hardware.capability import CapabilityWarning, check_capabilities
from switchover.hardware.catalog import CATALOG, GpuSpec, find_gpu, gpu_names
from switchover.hardware.diff import HostDiff, diff_hosts, load_fingerprint
from switchover.hardware.fingerprint import GpuFingerprint, HostFingerprint, fingerprint

__all__ = [
    "CATALOG",
    "CapabilityWarning",
    "GpuFingerprint",
    "GpuSpec",
    "HostDiff",
    "HostFingerprint",
    "check_capabilities",
    "diff_hosts",
    "find_gpu",
    "fingerprint",
    "gpu_names",
    "load_fingerprint",
]
