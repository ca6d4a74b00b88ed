"""`switchover demo`: set up the test bed, start two engines on SmolLM2, run check and a short rollout."""

from __future__ import annotations

from pathlib import Path

import typer
from rich.markup import escape

from switchover.cli import params
from switchover.cli.common import console, err_console, print_json


def register(app: typer.Typer) -> None:
    @app.command()
    def demo(
        workdir: Path = typer.Option(
            Path("switchover-demo"), "--dir", help="Where the config and runs go.", parser=params.OUT_DIR
        ),
        rollout: bool = typer.Option(True, "--rollout/--no-rollout", help="Run the short gateway rollout."),
        json_out: bool = params.json_flag("the demo's result"),
    ) -> None:
        """Set up the test bed (first time: ~15 min), start vLLM CPU (old) and llama-server (new) on
        SmolLM2-135M-Instruct, run `switchover check`, then a short gateway rollout with shadow traffic, and print
        where the report is. Stops every engine it started, also on Ctrl-C. Exit 0 when the demo ran (whatever
        the verdict); the verdict is printed.

        Example: switchover demo --dir /tmp/switchover-demo
        """
        from switchover.config import load_migration
        from switchover.demo import run_demo
        from switchover.runs import prepare_folder

        prepare_folder(workdir)

        result = run_demo(
            workdir,
            lambda msg: err_console.print(msg, highlight=False, soft_wrap=True, markup=False),
            load=load_migration,
            rollout=rollout,
        )
        if json_out:
            print_json(result)
            return
        style = {"go": "bold green", "no-go": "bold red", "incomplete": "bold yellow"}.get(result.overall or "", "")
        console.print(
            f"[{style}]VERDICT: {(result.overall or '?').upper()}[/] — {escape(result.overall_reason or '')}",
            highlight=False,
            soft_wrap=True,
        )
        if result.rollout is not None:
            r = result.rollout
            console.print(
                f"rollout: {len(r.steps)} step(s), now at {r.final_stage} ({r.final_weight}%); "
                f"{r.requests_ok}/{r.requests_sent} requests answered; audit log {r.audit_log}",
                highlight=False,
                soft_wrap=True,
                markup=False,
            )
            for s in r.steps:
                console.print(f"  {s.action}: {s.message}", highlight=False, soft_wrap=True, markup=False)
        else:
            console.print(f"rollout: {result.rollout_not_run}", highlight=False, soft_wrap=True, markup=False)
        timing = ", ".join(f"{k} {v:.0f} s" for k, v in result.seconds.items())
        console.print(f"took: {timing}", highlight=False)
        console.print(
            f"report: [bold]{escape(str(result.report_html))}[/]  (summary for a PR: {escape(str(result.report_md))})",
            highlight=False,
            soft_wrap=True,
        )
