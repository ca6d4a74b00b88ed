"""`switchover drill`: time a rollback (stop new, start old, first good response) for the report."""

from __future__ import annotations

import sys
from pathlib import Path

import typer
from rich.markup import escape

from switchover.cli import params
from switchover.cli.common import console, print_json, run
from switchover.drill import run_drill
from switchover.errors import ExitCode
from switchover.runs import RunDir


def register(app: typer.Typer) -> None:
    @app.command()
    def drill(
        stop_new: str = typer.Option(..., "--stop-new", help="Shell command that stops the new engine (must exit)."),
        start_old: str = typer.Option(..., "--start-old", help="Shell command that starts the old engine."),
        url: str = typer.Option(..., "--url", help="Base URL of the old engine once started.", parser=params.URL),
        model: str = params.served_model(" to request"),
        max_ms: float = typer.Option(5000.0, "--max-ms", help="Budget of each 1-token readiness check.",
                                     parser=params.MILLISECONDS),
        timeout: float = typer.Option(600.0, "--timeout", help="Give up this many seconds after starting old.",
                                      parser=params.SECONDS),
        max_recovery_s: float = typer.Option(
            None, "--max-recovery-s", help="Acceptable outage; exit 1 if recovery takes longer.", parser=params.SECONDS
        ),
        runs: Path = typer.Option(Path("runs"), "--runs", help="Where the run directory is created.",
                                  parser=params.OUT_DIR),
        json_out: bool = params.json_flag(),
    ) -> None:
        """Rollback drill: stop new, start old, time the first good response (docs/checklist.md#rollout.rollback).
        Exit 1 if it failed.

        Example: switchover drill --stop-new 'systemctl stop llm-new' --start-old 'systemctl start llm-old'
        --url http://127.0.0.1:8000 --max-recovery-s 120
        """
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
            if result.within_budget is False:
                console.print(f"[red]over the acceptable outage of {max_recovery_s:g} s[/]", highlight=False)
            if result.foreground_pid:
                console.print(
                    f"the old engine runs in the foreground as pid {result.foreground_pid} "
                    f"(log: {rd.file('start-old.log')})",
                    highlight=False, markup=False,
                )
            console.print(f"written: {path}", highlight=False, markup=False)
        sys.exit(int(ExitCode.OK if result.ok and result.within_budget is not False else ExitCode.FAILED))
