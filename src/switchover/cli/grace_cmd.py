"""`switchover plan grace`: the drain grace a deploy needs (the longest generation plus TTFT and a margin) and the
deploy settings that are shorter."""

from __future__ import annotations

from pathlib import Path

import typer
from rich.markup import escape

from switchover import inputs
from switchover.cli import params
from switchover.cli.common import console, print_json
from switchover.errors import BadInput, CheckFailed

JSON = params.json_flag()


def grace_cmd(
    max_tokens: int = typer.Option(..., "--max-tokens", help="Largest max_tokens you serve.", parser=params.TOKENS),
    tpot_p99_ms: float = typer.Option(
        None, "--tpot-p99-ms", help="TPOT p99 under load, ms.", parser=params.MILLISECONDS
    ),
    ttft_p99_ms: float = typer.Option(
        None,
        "--ttft-p99-ms",
        help="TTFT p99 under load, ms (left out if unknown).",
        parser=params.non_negative(inputs.MAX_MS),
    ),
    bench: Path = typer.Option(None, "--bench", help="Take TPOT/TTFT p99 from a bench run directory."),
    endpoint: str = typer.Option(None, "--endpoint", help="With --bench: which endpoint's steps."),
    margin_s: float = typer.Option(
        None,
        "--margin-s",
        help="Extra seconds (default 10% of generation, >= 5 s).",
        parser=params.non_negative(inputs.MAX_SECONDS),
    ),
    scan_dir: Path = typer.Option(None, "--scan", help="Directory (or file) of Kubernetes / compose YAML."),
    client_timeout_s: float = typer.Option(
        None, "--client-timeout-s", help="Client-side request timeout.", parser=params.SECONDS
    ),
    json_out: bool = JSON,
) -> None:
    """Required drain grace (max_tokens x TPOT p99 + TTFT + margin) and the deploy settings that are shorter.

    Example: switchover plan grace --max-tokens 2000 --tpot-p99-ms 35 --scan deploy/
    """
    from switchover.plan.grace import required_grace
    from switchover.plan.grace_files import grace_report, latency_from_bench

    source = "flags"
    if bench is not None:
        tpot, ttft, source = latency_from_bench(bench, endpoint)
        tpot_p99_ms = tpot_p99_ms or tpot
        ttft_p99_ms = ttft_p99_ms if ttft_p99_ms is not None else ttft
    if tpot_p99_ms is None:
        raise BadInput("no TPOT given", hint="pass --tpot-p99-ms MS or --bench RUN_DIR")
    need = required_grace(max_tokens, tpot_p99_ms, ttft_p99_ms, margin_s, source)
    report = grace_report(need, scan_dir, client_timeout_s)
    if json_out:
        print_json(report)
    else:
        ttft_txt = (
            "TTFT not measured (left out)" if need.ttft_p99_ms is None else f"TTFT {need.ttft_p99_ms / 1000:.1f} s"
        )
        console.print(
            f"longest generation {need.generation_s:.1f} s ({max_tokens} x {need.tpot_p99_ms:g} ms) + "
            f"{ttft_txt} + margin {need.margin_s:.1f} s = "
            f"[bold]{need.required_s:.0f} s[/] grace needed"
        )
        for f in report.findings:
            mark = "[green]ok[/]" if f.ok else "[red]SHORT[/]"
            console.print(f"  {mark} {f.file}:{f.line} {f.setting} = {f.value_s}: {f.message}", highlight=False)
        for w in report.warnings:
            console.print(f"  [yellow]warning:[/] {escape(w)}", highlight=False)
        for skipped in report.skipped:
            console.print(f"  [yellow]not read:[/] {escape(skipped)}", highlight=False)
    if not report.ok:  # a setting shorter than the need fails; a client-timeout warning only warns (exit 0)
        raise CheckFailed(
            f"{sum(not f.ok for f in report.findings)} deploy setting(s) shorter than the "
            f"{need.required_s:.0f} s grace needed"
        )
