"""`switchover plan limits`: new's measured knee as the canary's weight cap and as client and gateway timeouts."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import typer
from rich.markup import escape

from switchover.cli import params
from switchover.cli.common import console, print_json
from switchover.errors import CheckFailed

JSON = params.json_flag()


def limits_cmd(
    bench: Path = typer.Option(..., "--bench", help="A bench run directory (its summary.json) that loaded new."),
    endpoint: str = typer.Option("new", "--endpoint", help="The bench endpoint label of new."),
    bucket: str = typer.Option(None, "--bucket", help="The input-length bucket (needed when several were measured)."),
    peak: float = typer.Option(
        None,
        "--peak",
        help="The service's peak load, in the ladder's unit (requests in "
        "flight, or req/s for a rate ladder); without it there is no weight cap.",
        parser=params.positive(1e9),
    ),
    margin: float = typer.Option(
        0.5, "--margin", help="Timeouts are the p99 at the knee times (1 + margin).", parser=params.non_negative(10.0)
    ),
    weight: float = typer.Option(
        None,
        "--weight",
        help="The canary weight planned, %: exit 1 when above the cap.",
        parser=params.non_negative(100.0),
    ),
    json_out: bool = JSON,
) -> None:
    """New's measured knee as a canary ceiling (weight cap = knee / peak) and as client and gateway timeouts (the
    E2E, TTFT and ITL p99 at the knee times 1 + margin). Exit 1 when --weight is above the cap.

    Example: switchover plan limits --bench runs/20261205T070000Z-bench --peak 40 --weight 20
    """
    from switchover.plan.limits import limits, read_bench

    result = limits(
        read_bench(bench), str(bench), endpoint=endpoint, bucket=bucket, peak=peak, margin=margin, planned_weight=weight
    )
    if json_out:
        print_json(result)
    else:
        _print_limits(result)
    if result.over_cap:
        raise CheckFailed(f"--weight {weight:g} % is above the cap of {result.weight_cap_percent} % new's knee allows")


def _print_limits(r: Any) -> None:
    knee = f"knee {r.knee:g}" if r.knee_found and r.knee is not None else "no knee in range"
    console.print(
        f"{escape(r.endpoint)} bucket {escape(str(r.bucket))}: {escape(r.metric)} {knee}; capacity "
        f"{r.capacity:g} {r.unit}; latencies at {r.step_load:g}",
        highlight=False,
    )
    cap = "unknown (no --peak)" if r.weight_cap_percent is None else f"[bold]{r.weight_cap_percent} %[/]"
    console.print(f"weight cap: {cap}" + (f" of a peak of {r.peak:g} {r.unit}" if r.peak else ""), highlight=False)

    def ms(v: float | None) -> str:
        return "not measured" if v is None else f"{v:.0f} ms"

    console.print(
        f"p99 at {r.step_load:g}: E2E {ms(r.e2e_p99_ms)}, TTFT {ms(r.ttft_p99_ms)}, ITL {ms(r.itl_p99_ms)}; "
        f"margin {r.margin:g}",
        highlight=False,
    )
    console.print(
        f"client timeout: {'-' if r.client_timeout_s is None else f'{r.client_timeout_s:g} s'}; "
        f"gateway.fallback.on_timeout_ms: {r.fallback_on_timeout_ms or '-'}; gateway.timeouts.idle_ms: "
        f"{r.idle_ms or '-'}",
        highlight=False,
    )
    for n in r.notes:
        console.print(f"  [dim]note:[/] {escape(n)}", highlight=False)
