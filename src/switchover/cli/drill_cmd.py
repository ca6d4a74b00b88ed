"""`switchover drill`: time a rollback (stop new, start old, first good response) for the report."""

from __future__ import annotations

import sys
from pathlib import Path

import typer
from rich.markup import escape

from switchover.cli import params
from switchover.cli.common import console, err_console, print_json, run
from switchover.errors import ExitCode
from switchover.runs import RunDir


def _progress(line: str) -> None:
    err_console.print(line, highlight=False, markup=False)


def register(app: typer.Typer) -> None:
    @app.command()
    def drill(
        stop_new: str = typer.Option(..., "--stop-new", help="Shell command that stops the new engine (must exit)."),
        start_old: str = typer.Option(..., "--start-old", help="Shell command that starts the old engine."),
        url: str = typer.Option(..., "--url", help="Base URL of the old engine once started.", parser=params.URL),
        model: str = params.served_model(" to request"),
        max_ms: float = typer.Option(
            5000.0, "--max-ms", help="Budget of each 1-token readiness check.", parser=params.MILLISECONDS
        ),
        timeout: float = typer.Option(
            600.0, "--timeout", help="Give up this many seconds after starting old.", parser=params.SECONDS
        ),
        max_recovery_s: float = typer.Option(
            None, "--max-recovery-s", help="Acceptable outage; exit 1 if recovery takes longer.", parser=params.SECONDS
        ),
        warmup: bool = typer.Option(
            True,
            "--warmup/--no-warmup",
            help="Keep timing first tokens after the first good response until the TTFT is "
            "steady (the warm-up tail, docs/rollout.md#warm-up-tail).",
        ),
        warmup_window: int = typer.Option(
            5, "--warmup-window", help="Probes per median window.", parser=params.count(2, 50)
        ),
        warmup_tolerance: float = typer.Option(
            20.0,
            "--warmup-tolerance",
            help="Percent a window's median may differ from the level.",
            parser=params.Number(lo=0, hi=100, lo_open=True),
        ),
        warmup_max_s: float = typer.Option(
            120.0, "--warmup-max-s", help="Stop the warm-up probes after this long.", parser=params.SECONDS
        ),
        warmup_max_probes: int = typer.Option(
            200, "--warmup-max-probes", help="Stop after this many probes.", parser=params.count(4, 100_000)
        ),
        runs: Path = typer.Option(
            Path("runs"), "--runs", help="Where the run directory is created.", parser=params.OUT_DIR
        ),
        json_out: bool = params.json_flag(),
    ) -> None:
        """Rollback drill: stop new, start old, time the first good response (docs/checklist.md#rollout.rollback).
        Exit 1 if it failed.

        Example: switchover drill --stop-new 'systemctl stop llm-new' --start-old 'systemctl start llm-old'
        --url http://127.0.0.1:8000 --max-recovery-s 120
        """
        from switchover.drill import run_drill  # here, not at import: `drill --help` stays quick
        from switchover.warmup import WarmupSettings

        rd = RunDir.create(runs, "drill")
        result = run(
            run_drill(
                stop_cmd=stop_new,
                start_cmd=start_old,
                url=url,
                model=model,
                max_ms=max_ms,
                ready_timeout_s=timeout,
                log=rd.file("start-old.log"),
                max_recovery_s=max_recovery_s,
                warmup=WarmupSettings(
                    window=warmup_window,
                    tolerance_pct=warmup_tolerance,
                    max_s=warmup_max_s,
                    max_probes=max(warmup_max_probes, 2 * warmup_window),
                )
                if warmup
                else None,
                progress=None if json_out else _progress,
            )
        )
        path = rd.write_json("drill", result)
        if json_out:
            print_json(result)
        else:
            colour = "green" if result.ok and result.within_budget is not False else "red"
            console.print(
                f"[{colour}]{'recovered' if result.ok else 'failed'}[/]: {escape(result.reason)}",
                highlight=False,
                soft_wrap=True,
            )
            if result.warmup is not None:
                wcol = "green" if result.warmup.steady else "yellow"
                console.print(f"[{wcol}]warm-up[/]: {escape(result.warmup.reason)}", highlight=False, soft_wrap=True)
            if result.switch_s is not None:
                console.print(
                    f"switch time (stop issued → steady TTFT on old): {result.switch_s:.2f} s",
                    highlight=False,
                    markup=False,
                )
            if result.within_budget is False:
                console.print(f"[red]over the acceptable outage of {max_recovery_s:g} s[/]", highlight=False)
            if result.foreground_pid:
                console.print(
                    f"the old engine runs in the foreground as pid {result.foreground_pid} "
                    f"(log: {rd.file('start-old.log')})",
                    highlight=False,
                    markup=False,
                )
            console.print(f"written: {path}", highlight=False, markup=False)
        sys.exit(int(ExitCode.OK if result.ok and result.within_budget is not False else ExitCode.FAILED))
