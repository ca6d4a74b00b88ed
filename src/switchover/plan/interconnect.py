"""How the GPUs of a host are linked (NVLink or PCIe only) and what that means for a parallel layout: tensor
parallelism all-reduces the hidden state twice per layer, so TP over PCIe pays for every token on a link an order of
magnitude slower than NVLink. Facts cited in plan/data/interconnect.yaml."""

from __future__ import annotations

from functools import cache
from importlib import resources
from typing import Literal

import yaml
from pydantic import BaseModel, Field

from switchover.errors import BadInput
from switchover.hardware.catalog import find_gpu
from switchover.hardware.fingerprint import HostFingerprint
from switchover.model.card import ModelCard

LinkKind = Literal["nvlink", "pcie", "unknown"]


class GpuLinks(BaseModel):
    nvlink_domain: int = Field(description="GPUs one NVLink fabric joins; 0 = no NVLink")
    pcie: tuple[int, int] | None = Field(default=None, description="(generation, lanes)")
    source: str


class TensorParallelFacts(BaseModel):
    allreduces_per_layer: int
    activation_bytes: int
    source: str
    ring_factor_source: str
    pcie_guidance: str
    pcie_guidance_source: str


class InterconnectData(BaseModel):
    pcie_lane_gbs: dict[int, float]
    pcie_source: str
    tensor_parallel: TensorParallelFacts
    gpus: dict[str, GpuLinks]


@cache
def load_data() -> InterconnectData:
    folder = resources.files("switchover.plan").joinpath("data")  # a namespace package: one part per call
    text = folder.joinpath("interconnect.yaml").read_text(encoding="utf-8")
    return InterconnectData.model_validate(yaml.safe_load(text))


class Interconnect(BaseModel):
    """What links the GPUs a plan uses, and where each fact comes from."""

    gpus: int
    nvlink: bool | None = Field(description="every GPU has NVLink (None: not known)")
    nvlink_domain: int | None = Field(default=None, description="GPUs one NVLink fabric joins (None: not known)")
    nvlink_gbs: float | None = Field(default=None, description="NVLink bandwidth per GPU, both directions, GB/s")
    pcie_gbs: float | None = Field(default=None, description="PCIe bandwidth per GPU and direction, GB/s")
    pcie_link: str | None = Field(default=None, description="e.g. gen4 x16 (of gen5 x16)")
    facts: list[str] = Field(default_factory=list, description="each fact with where it comes from")
    warnings: list[str] = Field(default_factory=list)


def pcie_gbs(gen: int | None, lanes: int | None) -> float | None:
    """GB/s per direction of a link; None for a generation the data file lacks or a non-positive lane count."""
    rate = load_data().pcie_lane_gbs.get(gen or 0)
    return round(rate * lanes, 1) if rate and lanes and lanes > 0 else None


def from_catalog(name: str, gpus: int) -> Interconnect:
    """The interconnect a catalog GPU ships with (its HGX/PCIe form), cited."""
    spec = find_gpu(name)
    links = load_data().gpus.get(spec.name)
    if links is None:
        return Interconnect(gpus=gpus, nvlink=None, facts=[f"{spec.name}: no interconnect facts in the catalog"])
    gen, lanes = links.pcie or (None, None)
    ic = Interconnect(
        gpus=gpus,
        nvlink=links.nvlink_domain > 1,
        nvlink_domain=links.nvlink_domain,
        nvlink_gbs=spec.nvlink_gbs if links.nvlink_domain > 1 else None,
        pcie_gbs=pcie_gbs(gen, lanes),
        pcie_link=f"gen{gen} x{lanes}" if gen else None,
    )
    ic.facts.append(
        f"{spec.name}: NVLink domain {links.nvlink_domain} GPU(s)"
        + (f", {spec.nvlink_gbs:g} GB/s per GPU ({spec.source})" if ic.nvlink_gbs else "")
        + f"; {links.source}"
    )
    if ic.pcie_gbs:
        ic.facts.append(f"PCIe gen{gen} x{lanes}: {ic.pcie_gbs:g} GB/s per direction ({load_data().pcie_source})")
    if gpus > 1:
        ic.facts.extend(tp_facts())
    return ic


def from_fingerprint(fp: HostFingerprint, gpus: int | None = None) -> Interconnect:
    """The interconnect NVML reported on a host: active NVLink links and the PCIe link each GPU trained to."""
    rows = fp.gpus[:gpus] if gpus else fp.gpus
    n = len(rows)
    links = [g.nvlink_active_links for g in rows]
    nvlink: bool | None = None if not rows or any(x is None for x in links) else all(x and x > 0 for x in links)
    ic = Interconnect(gpus=n, nvlink=nvlink)
    if nvlink is None:
        ic.facts.append("NVLink: NVML did not report the link state of every GPU")
    else:
        ic.facts.append(
            f"NVLink: {sum(1 for x in links if x)} of {n} GPU(s) with active links (NVML, "
            f"{min(x or 0 for x in links)}-{max(x or 0 for x in links)} links each)"
        )
    if rows and any(x for x in links) and not nvlink:
        ic.warnings.append(
            "only some GPUs have active NVLink links: a TP group must stay inside one NVLink group "
            "(check `nvidia-smi topo -m`)"
        )
    names = {g.catalog_name for g in rows}
    only = next(iter(names)) if len(names) == 1 else None
    catalog = load_data().gpus.get(only) if only else None
    if nvlink:
        ic.nvlink_domain = min(n, catalog.nvlink_domain) if catalog and catalog.nvlink_domain > 1 else None
        spec = find_gpu(rows[0].catalog_name) if rows[0].catalog_name else None
        ic.nvlink_gbs = spec.nvlink_gbs if spec else None
        if catalog:
            ic.facts.append(f"NVLink domain {catalog.nvlink_domain} for {rows[0].catalog_name} ({catalog.source})")
        else:
            ic.warnings.append(
                "which GPUs NVLink joins is not in the fingerprint: TP wider than 2 is assumed to "
                "cross PCIe (check `nvidia-smi topo -m`)"
            )
    cur = [(g.pcie_gen, g.pcie_width) for g in rows if pcie_gbs(g.pcie_gen, g.pcie_width)]
    unknown = [g.index for g in rows if g.pcie_gen and g.pcie_width and not pcie_gbs(g.pcie_gen, g.pcie_width)]
    if unknown:
        ic.facts.append(
            f"PCIe: link of GPU(s) {', '.join(map(str, unknown))} not rated (generation or width not in the data file)"
        )
    if cur:
        gen, lanes = min(cur, key=lambda c: pcie_gbs(*c) or 0)
        ic.pcie_gbs = pcie_gbs(gen, lanes)
        ic.pcie_link = f"gen{gen} x{lanes}"
        ic.facts.append(
            f"PCIe: slowest GPU link gen{gen} x{lanes} = {ic.pcie_gbs:g} GB/s per direction ({load_data().pcie_source})"
        )
        for g in rows:
            if (g.pcie_gen_max and g.pcie_gen and g.pcie_gen < g.pcie_gen_max) or (
                g.pcie_width_max and g.pcie_width and g.pcie_width < g.pcie_width_max
            ):
                ic.warnings.append(
                    f"GPU {g.index}: PCIe link at gen{g.pcie_gen} x{g.pcie_width} of "
                    f"gen{g.pcie_gen_max} x{g.pcie_width_max} (NVML; an idle GPU may train down to save "
                    "power: read it again under load)"
                )
    if n > 1:
        ic.facts.extend(tp_facts())
    return ic


def tp_facts() -> list[str]:
    """The cited facts behind every TP-over-PCIe caveat."""
    f = load_data().tensor_parallel
    return [f"TP traffic: {f.source}; {f.ring_factor_source}", f"{f.pcie_guidance} ({f.pcie_guidance_source})"]


def tp_link(ic: Interconnect | None, tp: int) -> LinkKind | None:
    """The link a TP group of `tp` GPUs all-reduces over (None for TP=1)."""
    if tp <= 1:
        return None
    if ic is None or ic.nvlink is None:
        return "unknown"
    if not ic.nvlink:
        return "pcie"
    if ic.nvlink_domain is None:
        return "nvlink" if tp <= 2 else "unknown"
    return "nvlink" if tp <= ic.nvlink_domain else "pcie"


def allreduce_bytes_per_token(card: ModelCard, tp: int) -> int:
    """Bytes each GPU sends per token for TP all-reduces: 2 per layer of the hidden state, ring factor 2(N-1)/N."""
    f = load_data().tensor_parallel
    if tp <= 1:
        return 0
    per_layer = f.allreduces_per_layer * card.hidden_size * f.activation_bytes
    return int(per_layer * card.num_layers * 2 * (tp - 1) / tp)


def tp_caveat(card: ModelCard, ic: Interconnect | None, tp: int, pp: int) -> tuple[LinkKind | None, str | None]:
    """(link, caveat) for a layout's TP group: TP over PCIe is flagged with the bytes it moves and the guidance."""
    link = tp_link(ic, tp)
    if link is None or ic is None:
        return link, None
    per_token = allreduce_bytes_per_token(card, tp)
    if link == "pcie":
        speed = f"{ic.pcie_link}, {ic.pcie_gbs:g} GB/s" if ic.pcie_gbs else "PCIe"
        ms = (
            f", >= {per_token * 1000 / (ic.pcie_gbs * 1e9) * 1e3:.1f} ms of link time per 1,000 tokens"
            if (ic.pcie_gbs)
            else ""
        )
        nv = f"; NVLink would give {ic.nvlink_gbs / 2:g}" if ic.nvlink_gbs else ""
        f = load_data().tensor_parallel
        return link, (
            f"TP={tp} all-reduces over PCIe ({speed}{nv}): {per_token / 1024:.0f} KiB per token per GPU"
            f"{ms}; PP or DP puts fewer bytes on PCIe (see {f.pcie_guidance_source})"
        )
    if link == "unknown":
        return link, f"TP={tp}: whether it all-reduces over NVLink or PCIe is not known (give --fingerprint)"
    return link, None


class Host(BaseModel):
    """The GPUs a layout plan is for: count, memory each, catalog name, and their interconnect."""

    gpus: int
    total_gib: float | None = None
    gpu_name: str | None = None
    interconnect: Interconnect | None = None


def host_from(fp: HostFingerprint | None, *, gpu_name: str | None, total_gib: float | None, gpus: int | None) -> Host:
    """Merge a fingerprint with --gpu/--gpu-mem-gib/--gpus (the options win for memory and count)."""
    if fp is None:
        if gpus is None:
            raise BadInput("--gpus is needed (or --fingerprint host.json, whose GPUs are counted)")
        return Host(
            gpus=gpus,
            total_gib=total_gib,
            gpu_name=gpu_name,
            interconnect=from_catalog(gpu_name, gpus) if gpu_name else None,
        )
    if not fp.gpu_present or not fp.gpus:
        raise BadInput(f"--fingerprint: no GPU in it ({fp.reason or 'empty GPU list'})")
    n = gpus or len(fp.gpus)
    if n > len(fp.gpus):
        raise BadInput(f"--gpus {n}: the fingerprint lists {len(fp.gpus)} GPU(s)")
    first = fp.gpus[0]
    name = gpu_name or first.catalog_name
    if total_gib is None:
        if any(g.mig_enabled for g in fp.gpus[:n]):  # NVML reports the whole GPU; a MIG instance sees a slice
            raise BadInput(
                "--fingerprint: MIG is enabled on its GPUs, and the fingerprint holds the whole GPU's "
                "memory, not the slice an engine sees",
                hint="pass --gpu-mem-gib with the MIG slice's memory",
            )
        measured = first.memory_total_mib / 1024
        # the catalog holds the CUDA-visible total (a little under NVML's); a smaller measured total is another SKU
        total_gib = min(find_gpu(name).total_gib, measured) if name else measured
    from_cat = fp.host.get("source", "").startswith("catalog:") and first.catalog_name
    ic = from_catalog(first.catalog_name, n) if from_cat and first.catalog_name else from_fingerprint(fp, n)
    return Host(gpus=n, total_gib=total_gib, gpu_name=name, interconnect=ic)
