"""`switchover hw ...`: this host's GPU fingerprint, the GPU catalog, and what changes between two hosts."""

from __future__ import annotations

import typer
from rich.markup import escape
from rich.table import Table

from switchover.cli import params
from switchover.cli.common import console, print_json
from switchover.config.migration import load_migration
from switchover.engines.compat import CompatFinding, EnginePin, driver_support, parse_pin
from switchover.engines.compiled import read_compiled_engine
from switchover.engines.formats import ENGINES, format_of_card
from switchover.errors import CheckFailed
from switchover.hardware import CATALOG, diff_hosts, fingerprint, load_fingerprint
from switchover.hardware.diff import (
    Change,
    CompiledFinding,
    HostDiff,
    KernelChange,
    compiled_findings,
    engine_findings,
    kernel_changes,
)
from switchover.plan.choose_models import resolve_model

app = typer.Typer(
    help="GPU fingerprint, catalog and host diffs (NVML through the optional `gpu` extra).\n\n"
    "Example: switchover hw diff a.json catalog:H100-80Gx8",
    no_args_is_help=True,
)


@app.command("fingerprint")
def fingerprint_cmd(json_out: bool = params.json_flag("the fingerprint")) -> None:
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
    console.print(
        f"driver {fp.driver_version or 'unknown'}, CUDA {fp.cuda_driver_version or 'unknown'} (driver API)",
        markup=False,
        highlight=False,
    )
    support = driver_support(fp.driver_version)
    if support:
        console.print(f"  {support}", markup=False, highlight=False)
    table = Table("#", "name", "memory MiB", "sm", "PCIe", "NVLink", "L2 MiB", "catalog")
    for g in fp.gpus:
        table.add_row(
            str(g.index),
            g.name,
            str(g.memory_total_mib),
            g.compute_capability or "?",
            f"gen{g.pcie_gen}/{g.pcie_gen_max} x{g.pcie_width}/{g.pcie_width_max}",
            "?" if g.nvlink_active_links is None else str(g.nvlink_active_links),
            str(g.l2_mib or "?"),
            g.catalog_name or "-",
        )
    console.print(table)


@app.command("gpus")
def gpus_cmd(json_out: bool = params.json_flag("the catalog")) -> None:
    """The GPU catalog that --gpu NAME accepts.

    Example: switchover hw gpus
    """
    if json_out:
        print_json([g.model_dump() for g in CATALOG])
        return
    table = Table("name", "aliases", "memory MiB", "GB/s", "sm", "bf16", "fp8")
    for g in CATALOG:
        table.add_row(
            g.name,
            ", ".join(g.aliases[:2]),
            str(g.memory_mib),
            f"{g.bandwidth_gbs:g}",
            g.compute_capability,
            "yes" if g.sm >= 80 else "no",
            "yes" if g.sm >= 89 else "no",
        )
    console.print(table)


@app.command("diff")
def diff_cmd(
    a: str = typer.Argument(..., help="Fingerprint JSON of host A, or catalog:NAME[xCOUNT]."),
    b: str = typer.Argument(..., help="Fingerprint JSON of host B, or catalog:NAME[xCOUNT]."),
    engine: list[str] = typer.Option(
        None,
        "--engine",
        "-e",
        help="Engine to run on B, ENGINE or ENGINE@VERSION "
        "(or ENGINE==VERSION; repeatable): can that build run on B's driver and GPUs, "
        "and with which kernels? Without a version the newest known is assumed, and "
        "said.",
    ),
    migration: str = typer.Option(
        None,
        "--migration",
        help="Migration file (switchover.yaml): check its new engine (and new.engine_version, when pinned) against B.",
    ),
    model: str = typer.Option(
        None,
        "--model",
        "-m",
        help="Model (as `plan capacity -m`, or builtin:ID): the "
        "kernel its weight format loads with on A and on B, per engine; a TensorRT-LLM "
        "engine directory (built on A): whether B can run it.",
    ),
    json_out: bool = params.json_flag("the diff"),
) -> None:
    """Explain what changes for an engine between two hosts; with --engine/--migration whether a pinned engine
    build runs on B, with --model which kernel the checkpoint loads with on B instead of A (the rules of that
    engine release).

    Exit codes: 0 nothing fails; 1 a named engine's build cannot run on B, or it cannot load the checkpoint there;
    2 bad input.

    Example: switchover hw diff a.json catalog:H100-80Gx8 --engine vllm@0.11.0 -m builtin:openai/gpt-oss-120b
    """
    pins = [parse_pin(text) for text in engine or []]
    if migration is not None:
        new = load_migration(migration).new
        pins.append(EnginePin(engine=new.engine.value, version=new.engine_version))
    host_a, host_b = load_fingerprint(a), load_fingerprint(b)
    result = diff_hosts(host_a, host_b, a, b)
    result.engines = engine_findings([p for p in pins if p.engine in ENGINES], host_b) + [
        CompatFinding(
            engine=p.engine,
            version=None,
            status="unknown",
            message=f"{p.engine}: not an engine with a profile; nothing to check",
        )
        for p in pins
        if p.engine not in ENGINES
    ]
    compiled = read_compiled_engine(model) if model is not None else None
    if compiled is not None:  # a compiled engine is bound to the GPU architecture it was built on, not a checkpoint
        result.compiled = compiled_findings(compiled, host_a, host_b, a, b)
    elif model is not None:
        card, qc = resolve_model(model)
        fmt, why = format_of_card(card, qc)
        if fmt is None:
            result.changes.append(
                Change(field="weight format", a=None, b=None, impact=f"{card.name}: kernels not compared: {why}")
            )
        else:
            wanted = list(dict.fromkeys(p.engine for p in pins if p.engine in ENGINES)) or list(ENGINES)
            result.kernels = kernel_changes(
                fmt,
                wanted,
                host_a,
                host_b,
                a,
                b,
                dtype=card.dtype,
                versions={p.engine: p.version for p in pins if p.version},
            )
    failed = _failures(result, {p.engine for p in pins})
    if json_out:
        print_json(result)
        _exit_on(failed)
        return
    if not result.changes:
        console.print("no differences that matter to an engine")
    else:
        table = Table("what", escape(a), escape(b), "impact")
        for c in result.changes:
            table.add_row(escape(c.field), escape(c.a or "-"), escape(c.b or "-"), escape(c.impact))
        console.print(table)
    for f in result.engines:
        flag = "" if f.verified or f.status == "unknown" else " (unverified data)"
        console.print(f"{f.status.upper()}: {f.message}{flag}", markup=False, highlight=False)
        for src in f.sources:
            console.print(f"    source: {src}", markup=False, highlight=False)
    for cf in result.compiled:
        console.print(
            f"{'FAILS: ' if cf.status == 'fails' else ''}compiled engine: {cf.message}", markup=False, highlight=False
        )
        for src in cf.sources:
            console.print(f"    source: {src}", markup=False, highlight=False)
    for k in result.kernels:
        flag = "" if k.verified or k.b_loads is None else " (unverified data)"
        mark = "FAILS: " if k in failed else ""
        console.print(f"{mark}kernel: {k.message}{flag}", markup=False, highlight=False)
    _exit_on(failed)


def _failures(result: HostDiff, named: set[str]) -> list[CompatFinding | KernelChange | CompiledFinding]:
    """What fails on B: a pinned build that cannot run there, a checkpoint a named engine cannot load there (a
    kernel survey over every engine, with none named, fails nothing), or a compiled engine B cannot run."""
    return [
        *(f for f in result.engines if f.status == "fails"),
        *(k for k in result.kernels if k.engine in named and k.b_loads is False),
        *(c for c in result.compiled if c.status == "fails"),
    ]


def _exit_on(failed: list[CompatFinding | KernelChange | CompiledFinding]) -> None:
    """Exit 1 (the exit-code contract) when anything FAILS."""
    if failed:
        what = [
            "compiled engine"
            if isinstance(x, CompiledFinding)
            else f"{x.engine} {'build' if isinstance(x, CompatFinding) else 'kernel'}"
            for x in failed
        ]
        raise CheckFailed(f"fails on B: {', '.join(what)}")


from switchover.cli.startlog_cmd import register as _register_startlog  # noqa: E402

_register_startlog(app)
