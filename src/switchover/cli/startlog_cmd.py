"""`switchover hw startlog LOG --engine E`: what the engine chose at start-up, its fallbacks, what was expected."""

from __future__ import annotations

import typer
from rich.markup import escape
from rich.table import Table

from switchover.cli import params
from switchover.cli.common import console, print_json
from switchover.engines.startlog import StartlogReport, check_file, engine_names
from switchover.errors import CheckFailed


def _short(text: str, width: int = 100) -> str:
    """The message of a log line without its process/time prefix, cut to `width`."""
    msg = text.split("] ", 1)[-1] if text.startswith("(") else text
    return msg if len(msg) <= width else msg[: width - 1] + "…"


def render(r: StartlogReport) -> None:
    console.print(
        f"{r.engine} start-up at line {r.start_line} of {escape(r.log)} ({r.lines_read} lines read)", highlight=False
    )
    table = Table("what", "value", "how", "line", "evidence / reason")
    for f in r.findings:
        where = str(f.evidence.line) if f.evidence else ""
        why = _short(f.evidence.text) if f.evidence else (f.source or f.reason or "")
        table.add_row(f.field, escape(f.value or "-"), f.how, where, escape(why))
    console.print(table)
    for fb in r.fallbacks:
        colour = "red" if fb.severity == "downgrade" else "yellow"
        console.print(
            f"[{colour}]{fb.severity}[/] line {fb.evidence.line}: {escape(fb.evidence.text)}", highlight=False
        )
        console.print(f"  [dim]printed by {escape(fb.evidence.source)}[/]", highlight=False)
    for e in r.expectations:
        mark = {"match": "[green]match[/]", "mismatch": "[red]MISMATCH[/]", "unverified": "[red]unverified[/]"}
        console.print(
            f"{mark[e.status]} {e.field}: expected {escape(e.expected)} ({escape(e.origin)}), log says "
            f"{escape(e.found or 'nothing')}",
            highlight=False,
        )
    if r.hint:
        console.print(f"[yellow]hint:[/] {escape(r.hint)}", highlight=False)
    console.print(f"verdict: {r.verdict}", highlight=False)


def register(app: typer.Typer) -> None:
    @app.command("startlog")
    def startlog_cmd(
        log: str = typer.Argument(..., help="The engine's start-up log (a file; the last start-up in it is read)."),
        engine: str = typer.Option(
            None,
            "--engine",
            "-e",
            help=f"One of: {', '.join(engine_names())} (default: the one whose start-up lines the log holds).",
        ),
        expect: list[str] = typer.Option(
            None,
            "--expect",
            help="KEY=VALUE the migration expects, e.g. "
            "attention_backend=FLASH_ATTN, kv_cache_dtype=fp8, cuda_graphs=on.",
        ),
        flags: str = typer.Option(
            None,
            "--flags",
            help="The engine's launch flags; the ones that set a reported "
            "value become expectations, e.g. '--kv-cache-dtype fp8 --enforce-eager'.",
        ),
        against: str = typer.Option(
            None,
            "--against",
            help="The same engine's start-up log from the old host: each value it logged becomes an expectation.",
        ),
        json_out: bool = params.json_flag("the report"),
    ) -> None:
        """Attention backend, KV cache dtype, quantization kernel, CUDA graphs and fallbacks from a start-up log;
        exit 1 on a downgrade or a value other than expected.

        Example: switchover hw startlog vllm.log --engine vllm --expect attention_backend=FLASH_ATTN
        """
        report = check_file(log, engine, expect=expect, flags=flags, against=against)
        if json_out:
            print_json(report)
        else:
            render(report)
        if report.verdict != "ok":
            bad = [e.field for e in report.expectations if e.status != "match"]
            down = sum(1 for f in report.fallbacks if f.severity == "downgrade")
            parts = ([f"{', '.join(bad)} not as expected"] if bad else []) + (
                [f"{down} fallback(s) to a slower or weaker path"] if down else []
            )
            raise CheckFailed(f"{report.verdict}: " + "; ".join(parts))
