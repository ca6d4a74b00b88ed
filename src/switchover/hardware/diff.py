"""Explain what changes for an inference engine between two hosts: the same weights on another machine."""

from __future__ import annotations

from pathlib import Path
from typing import Literal

from pydantic import BaseModel, Field, ValidationError

from switchover.engines.compat import CompatFinding, EnginePin, check_engine, format_rules_at, lookup_at, sm_of
from switchover.engines.compiled import CompiledEngine
from switchover.engines.formats import Device, FormatVerdict, load_matrix
from switchover.errors import BadInput
from switchover.hardware.capability import CAPABILITY_SOURCE
from switchover.hardware.catalog import find_gpu
from switchover.hardware.fingerprint import GpuFingerprint, HostFingerprint, fingerprint_from_catalog
from switchover.inputs import MAX_GPUS
from switchover.textfile import load_json

BF16_MIN_SM = 80  # bf16 tensor cores: Ampere and newer (hardware/capability.py)


class Change(BaseModel):
    """One difference and why it matters."""

    field: str
    a: str | None
    b: str | None
    impact: str


class KernelChange(BaseModel):
    """How one engine release loads a checkpoint's format on host A and on host B (engines/data/matrix/formats.yaml,
    with the rules of the pinned release from format_releases.yaml)."""

    engine: str
    version: str | None = Field(
        default=None, description="the engine release whose rules apply (None: the newest known)"
    )
    format: str = Field(description="the checkpoint's format as its config names it (fp16 and bf16 apart)")
    matrix_format: str | None = Field(
        default=None, description="the format matrix's key for it (16-bit weights share the 'bf16' rules)"
    )
    a_loads: bool | None
    a_kernel: str | None
    b_loads: bool | None
    b_kernel: str | None
    message: str
    sources: list[str] = Field(default_factory=list)
    verified: bool = False


class CompiledFinding(BaseModel):
    """Whether a compiled engine (a TensorRT-LLM engine directory) built on host A runs on host B."""

    engine_dir: str
    status: Literal["runs", "fails", "unknown"]
    message: str
    sources: list[str] = Field(default_factory=list)


class HostDiff(BaseModel):
    a: str
    b: str
    changes: list[Change]
    engines: list[CompatFinding] = Field(default_factory=list, description="pinned engines checked against host B")
    kernels: list[KernelChange] = Field(default_factory=list, description="a model's kernels on A vs B")
    compiled: list[CompiledFinding] = Field(default_factory=list, description="a compiled engine built on A, on B")


def load_fingerprint(ref: str) -> HostFingerprint:
    """A fingerprint JSON file (from `switchover hw fingerprint --json`), or `catalog:NAME[xN]`."""
    if ref.startswith("catalog:"):
        return _from_catalog(ref)
    path = Path(ref)
    if not path.exists():
        raise BadInput(
            f"{ref}: no such file",
            hint="write one with `switchover hw fingerprint --json > a.json`, or use catalog:H100-80G",
        )
    data = load_json(path, max_bytes=16 << 20, what="fingerprint JSON")
    try:
        return HostFingerprint.model_validate(data)
    except ValidationError as exc:
        first = exc.errors()[0]
        raise BadInput(f"{ref}: not a fingerprint: {'.'.join(map(str, first['loc']))}: {first['msg']}") from None


def _from_catalog(ref: str) -> HostFingerprint:
    """`catalog:NAME[xCOUNT]`: COUNT GPUs (1-MAX_GPUS) of a catalog model."""
    rest = ref.removeprefix("catalog:")
    name, sep, count = rest.rpartition("x")
    if not sep or _in_catalog(rest):  # a name may itself end in x + digits: rtx4090
        name, count = rest, "1"
    if not (count.isascii() and count.isdigit()) or len(count) > 7 or not 1 <= int(count) <= MAX_GPUS:
        raise BadInput(f"{ref}: the GPU count after 'x' must be a whole number from 1 to {MAX_GPUS}, got {count!r}")
    try:
        return fingerprint_from_catalog(name, int(count))
    except BadInput as exc:
        raise BadInput(f"{ref}: {exc.message}", hint=exc.hint) from None


def _in_catalog(name: str) -> bool:
    try:
        find_gpu(name)
    except BadInput:
        return False
    return True


def _gpu_changes(a: GpuFingerprint, b: GpuFingerprint) -> list[Change]:
    out: list[Change] = []
    if a.name != b.name:
        out.append(
            Change(
                field="gpu",
                a=a.name,
                b=b.name,
                impact="different GPU model: re-plan capacity and "
                "re-run bench; kernels and attention backends are chosen per GPU",
            )
        )
    if a.memory_total_mib != b.memory_total_mib:
        delta = (b.memory_total_mib - a.memory_total_mib) / 1024
        out.append(
            Change(
                field="memory_total_mib",
                a=str(a.memory_total_mib),
                b=str(b.memory_total_mib),
                impact=f"{delta:+.1f} GiB per GPU: the same memory fraction gives a "
                f"{'larger' if delta > 0 else 'smaller'} KV pool (`switchover plan capacity`); "
                "engine defaults tiered by memory (max_num_seqs, chunk sizes) may change",
            )
        )
    sa, sb = sm_of(a.compute_capability), sm_of(b.compute_capability)
    if sa != sb and sa is not None and sb is not None:
        notes = []
        for bound, what in (
            (80, "bf16 and FlashAttention-2"),
            (89, "fp8 (weights and KV cache)"),
            (90, "Hopper kernels (FlashAttention-3, FlashMLA)"),
        ):
            if min(sa, sb) < bound <= max(sa, sb):
                notes.append(f"{what} {'lost' if sb < sa else 'gained'} (needs sm{bound})")
        out.append(
            Change(
                field="compute_capability",
                a=a.compute_capability,
                b=b.compute_capability,
                impact="; ".join(notes) or f"same feature tier ({CAPABILITY_SOURCE})",
            )
        )
    if a.bandwidth_gbs and b.bandwidth_gbs and a.bandwidth_gbs != b.bandwidth_gbs:
        ratio = a.bandwidth_gbs / b.bandwidth_gbs
        out.append(
            Change(
                field="bandwidth_gbs",
                a=f"{a.bandwidth_gbs:g}",
                b=f"{b.bandwidth_gbs:g}",
                impact=f"decode is memory-bound: expect TPOT about x{ratio:.2f} at low concurrency",
            )
        )
    if (a.pcie_gen, a.pcie_width) != (b.pcie_gen, b.pcie_width) and None not in (b.pcie_gen, b.pcie_width):
        out.append(
            Change(
                field="pcie",
                a=f"gen{a.pcie_gen} x{a.pcie_width}",
                b=f"gen{b.pcie_gen} x{b.pcie_width}",
                impact="host<->GPU bandwidth changes weight loading, CPU offload and KV offload speed; "
                "a link trained below its max (gen/width) is worth checking",
            )
        )
    if None not in (a.nvlink_active_links, b.nvlink_active_links) and a.nvlink_active_links != b.nvlink_active_links:
        out.append(
            Change(
                field="nvlink_active_links",
                a=str(a.nvlink_active_links),
                b=str(b.nvlink_active_links),
                impact="TP all-reduce over "
                + ("PCIe: TP>1 slows down" if not b.nvlink_active_links else "NVLink: TP>1 gets cheaper"),
            )
        )
    if a.l2_mib != b.l2_mib and a.l2_mib and b.l2_mib:
        out.append(
            Change(
                field="l2_mib",
                a=f"{a.l2_mib:g}",
                b=f"{b.l2_mib:g}",
                impact="L2 size changes small-batch kernel behaviour; compare bench knees, not means",
            )
        )
    if a.mig_enabled != b.mig_enabled and b.mig_enabled is not None:
        out.append(
            Change(
                field="mig_enabled",
                a=str(a.mig_enabled),
                b=str(b.mig_enabled),
                impact="MIG slices expose a fraction of memory and SMs: plan against the slice",
            )
        )
    return out


def diff_hosts(a: HostFingerprint, b: HostFingerprint, a_name: str = "A", b_name: str = "B") -> HostDiff:
    """Every difference between two hosts that changes how an engine runs, with its impact."""
    changes: list[Change] = []
    if a.gpu_present != b.gpu_present:
        changes.append(
            Change(
                field="gpu_present",
                a=str(a.gpu_present),
                b=str(b.gpu_present),
                impact=f"one host has no GPU ({a.reason or b.reason})",
            )
        )
    if len(a.gpus) != len(b.gpus):
        changes.append(
            Change(
                field="gpu_count",
                a=str(len(a.gpus)),
                b=str(len(b.gpus)),
                impact="legal TP/PP/DP layouts change (`switchover plan parallel --gpus N`)",
            )
        )
    for field, what in (("driver_version", "driver"), ("cuda_driver_version", "CUDA (driver API)")):
        va, vb = getattr(a, field), getattr(b, field)
        if va != vb and va and vb:
            changes.append(
                Change(
                    field=field,
                    a=va,
                    b=vb,
                    impact=f"{what} changes: engine wheels need a minimum CUDA; kernels may differ",
                )
            )
    seen: set[tuple[str, str | None, str | None]] = set()
    for ga, gb in zip(a.gpus, b.gpus, strict=False):  # identical GPUs report once
        for change in _gpu_changes(ga, gb):
            if (change.field, change.a, change.b) not in seen:
                seen.add((change.field, change.a, change.b))
                changes.append(change)
    return HostDiff(a=a_name, b=b_name, changes=changes)


def _device(host: HostFingerprint) -> tuple[Device, int | None]:
    """cuda and the first GPU's compute capability, or cpu for a host without a GPU."""
    if not host.gpu_present or not host.gpus:
        return "cpu", None
    return "cuda", sm_of(host.gpus[0].compute_capability)


def engine_findings(pins: list[EnginePin], host: HostFingerprint) -> list[CompatFinding]:
    """Each pinned engine version against a host's driver and GPUs (engines/data/matrix/compat.yaml)."""
    out: list[CompatFinding] = []
    for pin in pins:
        out += check_engine(
            pin, host.driver_version, [g.compute_capability for g in host.gpus], host.gpu_present and bool(host.gpus)
        )
    return out


def _where(device: Device, sm: int | None) -> str:
    return "CPU" if device == "cpu" else f"sm{sm}" if sm is not None else "a GPU of unknown compute capability"


def checkpoint_label(fmt: str, dtype: str | None) -> str:
    """The checkpoint's format as a user names it: the matrix's 16-bit key ('bf16') says the config's dtype."""
    if fmt != "bf16":
        return fmt
    return {"float16": "fp16", "half": "fp16", "bfloat16": "bf16", "float32": "fp32", "float": "fp32"}.get(
        (dtype or "").lower(), "bf16"
    )


def _kernel_message(
    who: str, label: str, va: FormatVerdict, vb: FormatVerdict, where: tuple[str, str], names: tuple[str, str]
) -> str:
    """One sentence: what this checkpoint loads with on B, against A."""
    (a_name, b_name), (wa, wb) = names, where
    this = f"this {label} checkpoint"
    if vb.loads is None:
        return f"{who}: unknown whether {this} loads on {b_name} ({vb.reason})"
    if vb.loads is False:
        return f"{who}: {this} will not load on {b_name} ({vb.reason})" + (
            f"; on {a_name} it loads with {va.kernel}" if va.loads else ""
        )
    if va.loads and va.kernel == vb.kernel:
        return f"{who}: {this} loads with the same kernel on both hosts ({vb.kernel})"
    if va.loads:
        return f"{who}: {this} will load with {vb.kernel} on {b_name} ({wb}) instead of {va.kernel} on {a_name} ({wa})"
    return f"{who}: {this} will load with {vb.kernel} on {b_name} ({wb}); on {a_name}: {va.reason}"


def kernel_changes(
    fmt: str,
    engines: list[str],
    a: HostFingerprint,
    b: HostFingerprint,
    a_name: str = "A",
    b_name: str = "B",
    *,
    versions: dict[str, str] | None = None,
    dtype: str | None = None,
) -> list[KernelChange]:
    """For each engine (at its release in `versions`, else the newest known): the kernel this checkpoint format
    loads with on A and on B, said as a sentence that names the checkpoint as its config does (`dtype`)."""
    (da, sa), (db, sb) = _device(a), _device(b)
    label = checkpoint_label(fmt, dtype)
    out: list[KernelChange] = []
    for engine in engines:
        version = (versions or {}).get(engine)
        va, vb = lookup_at(engine, fmt, da, sa, version), lookup_at(engine, fmt, db, sb, version)
        who = f"{engine} {version}" if version else engine
        msg = _kernel_message(who, label, va, vb, (_where(da, sa), _where(db, sb)), (a_name, b_name))
        if label == "bf16" and vb.loads and db == "cuda" and sb is not None and sb < BF16_MIN_SM:
            msg += f"; {b_name} (sm{sb}) has no bf16 tensor cores: served as fp16 ({CAPABILITY_SOURCE})"
        note = format_rules_at(engine, version)[1]
        out.append(
            KernelChange(
                engine=engine,
                version=version,
                format=label,
                matrix_format=fmt,
                a_loads=va.loads,
                a_kernel=va.kernel,
                b_loads=vb.loads,
                b_kernel=vb.kernel,
                message=msg + (f" [{note}]" if note else ""),
                sources=[x for x in dict.fromkeys([va.source, vb.source]) if x],
                verified=va.verified and vb.verified,
            )
        )
    return out


def compiled_findings(
    engine: CompiledEngine, a: HostFingerprint, b: HostFingerprint, a_name: str = "A", b_name: str = "B"
) -> list[CompiledFinding]:
    """A compiled engine taken as built on A (its directory does not record the GPU): whether B can run it, by the
    GPU architecture, the GPU count its ranks need and the rank files present (formats.yaml `compiled`, cited)."""
    spec = load_matrix().formats[engine.format].compiled
    assert spec is not None  # the format is a compiled one (formats.yaml)
    where = engine.path
    built = f"built by TensorRT-LLM {engine.version}" if engine.version else "its TensorRT-LLM version unrecorded"
    out: list[CompiledFinding] = []
    if engine.missing_ranks:
        out.append(
            CompiledFinding(
                engine_dir=where,
                status="fails",
                sources=[spec.layout_source],
                message=(
                    f"{where}: built for {engine.world_size} rank(s) but rank file(s) "
                    f"{', '.join(f'rank{r}.engine' for r in engine.missing_ranks[:8])} are missing"
                ),
            )
        )
    (da, sa), (db, sb) = _device(a), _device(b)
    status: Literal["runs", "fails", "unknown"]
    if db == "cpu":
        status, msg = "fails", f"{b_name} has no GPU: a TensorRT engine runs on an NVIDIA GPU"
    elif da == "cpu" or sa is None or sb is None:
        status, msg = (
            "unknown",
            (
                f"the compute capability of {a_name if sa is None else b_name} is unknown: cannot "
                f"tell whether an engine built on {a_name} runs on {b_name}"
            ),
        )
    elif sa != sb:
        status, msg = (
            "fails",
            (
                f"an engine built on {a_name} (sm{sa}) does not run on {b_name} (sm{sb}): "
                f"{spec.architecture}; rebuild it on {b_name} from its checkpoint (trtllm-build), or "
                "serve the checkpoint itself"
            ),
        )
    else:
        status, msg = (
            "runs",
            (
                f"same GPU architecture (sm{sa}) on both hosts: it runs on {b_name} with the same "
                f"TensorRT-LLM version ({built})"
            ),
        )
        if a.gpus and b.gpus and a.gpus[0].name != b.gpus[0].name:
            msg += f"; its kernels were tuned on {a.gpus[0].name}, so re-run bench on {b.gpus[0].name}"
    out.append(
        CompiledFinding(
            engine_dir=where,
            status=status,
            message=f"{where} ({built}): {msg}",
            sources=[spec.architecture_source, spec.layout_source],
        )
    )
    if db == "cuda" and len(b.gpus) < engine.world_size:
        out.append(
            CompiledFinding(
                engine_dir=where,
                status="fails",
                sources=[spec.layout_source],
                message=(
                    f"{where}: built for {engine.world_size} GPU(s) (TP {engine.tp_size or 1} x PP "
                    f"{engine.pp_size or 1}); {b_name} has {len(b.gpus)}"
                ),
            )
        )
    return out
