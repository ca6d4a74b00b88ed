"""plan parallel with the interconnect: NVLink vs PCIe from a fingerprint or the catalog, TP across PCIe flagged with
its reason and ranked after the layouts that keep all-reduces off PCIe."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from unittest.mock import patch

import pytest

from switchover.cli.app import main
from switchover.engines import load_profile
from switchover.errors import BadInput
from switchover.hardware.fingerprint import GpuFingerprint, HostFingerprint
from switchover.model import card_from_config
from switchover.plan.interconnect import (
    allreduce_bytes_per_token,
    from_catalog,
    from_fingerprint,
    host_from,
    load_data,
    pcie_gbs,
    tp_link,
)
from switchover.plan.parallel import plan_layouts
from tests.plan import configs as C


def _gpu(
    i: int, *, links: int | None = 0, gen: int = 4, gen_max: int = 4, width: int = 16, name: str = "L40S-48G"
) -> GpuFingerprint:
    return GpuFingerprint(
        index=i,
        name="NVIDIA " + name,
        memory_total_mib=46068,
        pcie_gen=gen,
        pcie_gen_max=gen_max,
        pcie_width=width,
        pcie_width_max=16,
        nvlink_active_links=links,
        catalog_name=name,
    )


def _legal(layouts):
    return [x for x in layouts if x.legal]


def test_on_pcie_only_gpus_every_tp_layout_is_flagged_and_ranked_after_the_rest() -> None:
    card = card_from_config(C.QWQ_32B)
    ic = from_catalog("L40S-48G", 4)
    assert ic.nvlink is False and ic.pcie_gbs == pytest.approx(31.5)
    legal = _legal(plan_layouts(card, load_profile("vllm"), 4, 44.42, gpu_name="L40S-48G", interconnect=ic))
    kinds = [x.tp_link for x in legal]
    assert "pcie" in kinds and None in kinds
    assert kinds.index("pcie") > max(i for i, k in enumerate(kinds) if k is None)  # TP over PCIe ranks last
    for x in legal:
        if x.tp > 1:
            assert any(
                "over PCIe (gen4 x16, 31.5 GB/s)" in r and "KiB per token" in r and "parallelism_scaling.md" in r
                for r in x.reasons
            )


def test_nvswitch_hosts_keep_tp_on_nvlink_and_rank_by_kv_as_before() -> None:
    card = card_from_config(C.QWQ_32B)
    with_ic = plan_layouts(
        card, load_profile("vllm"), 8, 79.18, gpu_name="H100-80G", interconnect=from_catalog("H100-80G", 8)
    )
    without = plan_layouts(card, load_profile("vllm"), 8, 79.18, gpu_name="H100-80G")
    assert [(x.tp, x.pp, x.ep) for x in _legal(with_ic)] == [(x.tp, x.pp, x.ep) for x in _legal(without)]
    assert {x.tp_link for x in _legal(with_ic) if x.tp > 1} == {"nvlink"}
    assert not any("PCIe" in r for x in with_ic for r in x.reasons)


def test_bridged_pcie_cards_keep_tp2_on_nvlink_but_tp4_crosses_pcie() -> None:
    card = card_from_config(C.QWQ_32B)
    ic = from_catalog("H100-PCIe-80G", 4)
    legal = _legal(plan_layouts(card, load_profile("vllm"), 4, 79.18, gpu_name="H100-PCIe-80G", interconnect=ic))
    by_shape = {(x.tp, x.pp, x.dp): x for x in legal}
    assert by_shape[(2, 1, 2)].tp_link == "nvlink" and by_shape[(4, 1, 1)].tp_link == "pcie"
    assert legal[-1].tp_link == "pcie"
    assert any("NVLink would give 300" in r for r in by_shape[(4, 1, 1)].reasons)


@pytest.mark.parametrize(("tp", "kib"), [(1, 0), (2, 512), (4, 768), (8, 896)])
def test_allreduce_bytes_follow_two_per_layer_and_the_ring_factor(tp: int, kib: int) -> None:
    # Llama-3.1-8B: hidden 4096, 32 layers, 16-bit: 2 x 4096 x 2 B x 32 = 512 KiB, times 2(N-1)/N
    assert allreduce_bytes_per_token(card_from_config(C.LLAMA_8B), tp) == kib * 1024


def test_pcie_rates_come_from_the_data_file() -> None:
    assert pcie_gbs(4, 16) == pytest.approx(31.5) and pcie_gbs(5, 16) == pytest.approx(63.0)
    assert pcie_gbs(None, 16) is None and pcie_gbs(9, 16) is None
    assert all(g.source for g in load_data().gpus.values())


def test_fingerprint_nvlink_states_and_a_downtrained_link() -> None:
    fp = HostFingerprint(gpu_present=True, gpus=[_gpu(0), _gpu(1, gen=1)])
    ic = from_fingerprint(fp)
    assert ic.nvlink is False and ic.pcie_link == "gen1 x16" and ic.pcie_gbs == pytest.approx(4.0)
    assert any("GPU 1: PCIe link at gen1 x16 of gen4 x16" in w for w in ic.warnings)
    unknown = from_fingerprint(HostFingerprint(gpu_present=True, gpus=[_gpu(0, links=None), _gpu(1)]))
    assert unknown.nvlink is None and tp_link(unknown, 2) == "unknown"
    partial = from_fingerprint(HostFingerprint(gpu_present=True, gpus=[_gpu(0, links=4), _gpu(1, links=0)]))
    assert partial.nvlink is False and any("only some GPUs" in w for w in partial.warnings)
    sxm = [_gpu(i, links=18, gen=5, gen_max=5, name="H100-80G") for i in range(8)]
    full = from_fingerprint(HostFingerprint(gpu_present=True, gpus=sxm))
    assert full.nvlink and full.nvlink_domain == 8 and tp_link(full, 8) == "nvlink"
    assert tp_link(full, 1) is None


def test_host_from_refuses_what_cannot_be_planned() -> None:
    fp = HostFingerprint(gpu_present=True, gpus=[_gpu(0), _gpu(1)])
    with pytest.raises(BadInput, match="lists 2 GPU"):
        host_from(fp, gpu_name=None, total_gib=None, gpus=4)
    with pytest.raises(BadInput, match="no GPU"):
        host_from(
            HostFingerprint(gpu_present=False, reason="NVML unavailable"), gpu_name=None, total_gib=None, gpus=None
        )
    with pytest.raises(BadInput, match="--gpus is needed"):
        host_from(None, gpu_name="L4-24G", total_gib=None, gpus=None)
    host = host_from(fp, gpu_name=None, total_gib=None, gpus=None)
    assert host.gpus == 2 and host.gpu_name == "L40S-48G" and host.total_gib == pytest.approx(44.42)


def test_host_from_takes_memory_the_catalog_does_not_have() -> None:
    mig = HostFingerprint(gpu_present=True, gpus=[_gpu(0).model_copy(update={"mig_enabled": True})])
    with pytest.raises(BadInput, match="MIG is enabled"):
        host_from(mig, gpu_name=None, total_gib=None, gpus=None)
    assert host_from(mig, gpu_name=None, total_gib=20.0, gpus=None).total_gib == 20.0  # the slice, given
    small = HostFingerprint(gpu_present=True, gpus=[_gpu(0).model_copy(update={"memory_total_mib": 24 * 1024})])
    assert host_from(small, gpu_name=None, total_gib=None, gpus=None).total_gib == pytest.approx(24.0)


def _cli(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    capsys.readouterr()
    with patch.object(sys, "argv", ["switchover", "plan", "parallel", *args]), pytest.raises(SystemExit) as exc:
        main()
    out = capsys.readouterr()
    return int(exc.value.code or 0), out.out, out.err


def test_cli_reads_a_fingerprint_and_keeps_json_a_list(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    model = tmp_path / "m"
    model.mkdir()
    (model / "config.json").write_text(json.dumps(C.QWQ_32B))
    fp = tmp_path / "host.json"
    fp.write_text(HostFingerprint(gpu_present=True, gpus=[_gpu(i) for i in range(4)]).model_dump_json())
    code, out, err = _cli(capsys, "-m", str(model), "-e", "vllm", "--fingerprint", str(fp), "--json")
    rows = json.loads(out)
    assert code == 0 and isinstance(rows, list)
    assert {r["tp_link"] for r in rows if r["legal"] and r["tp"] > 1} == {"pcie"}
    assert "interconnect: NVLink: 0 of 4" in err
    code, out, _ = _cli(capsys, "-m", str(model), "-e", "vllm", "--fingerprint", "catalog:H100-80Gx8", "--no-illegal")
    assert code == 0 and "NVLink domain 8" in out
    code, _, err = _cli(capsys, "-m", str(model), "-e", "vllm", "--gpu", "L4")
    assert code == 2 and "--gpus is needed" in err


def test_cli_takes_a_builtin_config_and_ranks_pcie_tp_last(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = _cli(
        capsys, "-m", "builtin:Qwen/Qwen3-32B", "-e", "vllm", "--fingerprint", "catalog:L40S-48Gx4", "--json"
    )
    legal = [r for r in json.loads(out) if r["legal"]]
    assert code == 0 and legal[0]["tp"] == 1 and legal[-1]["tp_link"] == "pcie"


def test_every_catalog_gpu_has_cited_interconnect_facts() -> None:
    from switchover.hardware import CATALOG

    missing = [g.name for g in CATALOG if g.name not in load_data().gpus]
    assert missing == [], "add them to src/switchover/plan/data/interconnect.yaml"
    for g in CATALOG:  # NVLink in the catalog and an NVLink domain here agree
        assert (load_data().gpus[g.name].nvlink_domain > 1) == bool(g.nvlink_gbs) or g.name == "GH200-96G", g.name


def test_a_link_the_data_file_cannot_rate_is_said_not_rated_and_skipped() -> None:
    # a PCIe generation newer than the data file, or a nonsense width, must not become a speed (or a crash)
    fp = HostFingerprint(gpu_present=True, gpus=[_gpu(0, gen=99), _gpu(1, width=-16)])
    ic = from_fingerprint(fp)
    assert ic.pcie_gbs is None and ic.pcie_link is None
    assert any("GPU(s) 0, 1 not rated" in f for f in ic.facts)
    assert pcie_gbs(4, -16) is None and pcie_gbs(99, 16) is None
    fp = HostFingerprint(gpu_present=True, gpus=[_gpu(0, gen=99), _gpu(1)])
    assert from_fingerprint(fp).pcie_link == "gen4 x16"
