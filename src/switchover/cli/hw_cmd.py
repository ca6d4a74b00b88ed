"""`switchover hw ...`: this host's GPU fingerprint, the GPU catalog, and what changes between two hosts."""

from __future__ import annotations

import typer
from rich.markup import escape
from rich.table import Table

from switchover.cli.common import console, print_json
from switchover.hardware import CATALOG, diff_hosts, fingerprint, load_fingerprint

app = typer.Typer(help="GPU fingerprint, catalog and host diffs (NVML through the optional `gpu` extra).\n\n"
                  "Example: switchover hw diff a.json catalog:H100-80Gx8", no_args_is_help=True)


@app.command("fingerprint")
def fingerprint_cmd(json_out: bool = typer.Option(False, "--json", help="Print the fingerprint as JSON.")) -> None:
    """Name, memory, compute capability, driver, CUDA, PCIe, NVLink of each GPU; says so when there is none.

    Example: switchover hw fingerprint --json > host-a.json
    """
    fp = fingerprint()
    if json_out:
        print_json(fp)
        return
    if not fp.gpu_present:
        console.print(f"no GPU: {fp.reason}", markup=False, highlight=False)  # the reason holds "[gpu]"
        return
    console.print(f"driver {fp.driver_version}, CUDA {fp.cuda_driver_version}")
    table = Table("#", "name", "memory MiB", "sm", "PCIe", "NVLink", "L2 MiB", "catalog")
    for g in fp.gpus:
        table.add_row(str(g.index), g.name, str(g.memory_total_mib), g.compute_capability or "?",
                      f"gen{g.pcie_gen}/{g.pcie_gen_max} x{g.pcie_width}/{g.pcie_width_max}",
                      "?" if g.nvlink_active_links is None else str(g.nvlink_active_links),
                      str(g.l2_mib or "?"), g.catalog_name or "-")
    console.print(table)


@app.command("gpus")
def gpus_cmd(json_out: bool = typer.Option(False, "--json", help="Print the catalog as JSON.")) -> None:
    """The GPU catalog that --gpu NAME accepts.

    Example: switchover hw gpus
    """
    if json_out:
        print_json([g.model_dump() for g in CATALOG])
        return
    table = Table("name", "aliases", "memory MiB", "GB/s", "sm", "bf16", "fp8")
    for g in CATALOG:
        table.add_row(g.name, ", ".join(g.aliases[:2]), str(g.memory_mib), f"{g.bandwidth_gbs:g}",
                      g.compute_capability, "yes" if g.sm >= 80 else "no", "yes" if g.sm >= 89 else "no")
    console.print(table)


@app.command("diff")
def diff_cmd(
    a: str = typer.Argument(..., help="Fingerprint JSON of host A, or catalog:NAME[xCOUNT]."),
    b: str = typer.Argument(..., help="Fingerprint JSON of host B, or catalog:NAME[xCOUNT]."),
    json_out: bool = typer.Option(False, "--json", help="Print the diff as JSON."),
) -> None:
    """Explain what changes for an engine between two hosts.

    Example: switchover hw diff a.json catalog:H100-80Gx8
    """
    result = diff_hosts(load_fingerprint(a), load_fingerprint(b), a, b)
    if json_out:
        print_json(result)
        return
    if not result.changes:
        console.print("no differences that matter to an engine")
        return
    table = Table("what", escape(a), escape(b), "impact")
    for c in result.changes:
        table.add_row(escape(c.field), escape(c.a or "-"), escape(c.b or "-"), escape(c.impact))
    console.print(table)

from switchover.cli.startlog_cmd import register as _register_startlog  # noqa: E402, I001
_register_startlog(app)
