"""`switchover check`: the whole pre-flight in one command, one run directory, one go/no-go report."""

from __future__ import annotations

from pathlib import Path

import typer
from rich.markup import escape
from rich.table import Table

from switchover.check.registry import NAMES
from switchover.cli import params
from switchover.cli.common import console, err_console, print_json, run
from switchover.errors import BadInput, CheckFailed
from switchover.evidence.check import CheckReport

VERDICT_STYLE = {
    "go": "bold green",
    "no-go": "bold red",
    "warn": "yellow",
    "not-run": "dim",
    "incomplete": "bold yellow",
}


def render(report: CheckReport, html: Path | None = None) -> None:
    """One row per checklist item (its id is its section of docs/checklist.md), then the overall verdict and where
    the report is."""
    table = Table(
        title=f"switchover check: {report.name}",
        expand=True,
        caption="each item is explained in docs/checklist.md under its id",
    )
    table.add_column("verdict", no_wrap=True)
    table.add_column("item", overflow="fold", ratio=2)
    table.add_column("id", no_wrap=True)
    table.add_column("why", overflow="fold", ratio=5)
    for i in report.items:
        why = " | ".join(s for s in i.reason.split(" | ") if not s.startswith("ok:")) or i.reason
        table.add_row(
            f"[{VERDICT_STYLE[i.verdict]}]{i.verdict.upper()}[/]", escape(i.title), escape(i.id), escape(why[:400])
        )
    console.print(table)
    for p in report.parts:
        if p.status != "ran":
            console.print(f"[dim]part {p.part}: {p.status} — {escape(p.reason or '')}[/]", highlight=False)
    style = VERDICT_STYLE[report.overall]
    console.print(f"[{style}]VERDICT: {report.overall.upper()}[/] — {escape(report.overall_reason)}", highlight=False)
    if html is not None:
        console.print(f"report: {html}", highlight=False, soft_wrap=True)


def exit_for(report: CheckReport) -> None:
    """Exit 0 on go; 1 on no-go and on incomplete (a pre-flight that did not run cannot say go)."""
    if report.overall != "go":
        where = f"{report.run_dir}/report.html" if report.run_dir else None
        raise CheckFailed(f"{report.overall}: {report.overall_reason}", hint=f"see {where}" if where else None)


def register(app: typer.Typer) -> None:
    @app.command()
    def check(
        config: Path = typer.Argument(params.MIGRATION_FILE, help="The migration file (default: ./switchover.yaml)."),
        runs_dir: Path = typer.Option(
            None, "--runs-dir", help="Where the run directory goes (default: runs_dir).", parser=params.OUT_DIR
        ),
        only: list[str] = typer.Option(None, "--only", help=f"Run only these parts ({', '.join(NAMES)})."),
        skip: list[str] = typer.Option(None, "--skip", help="Skip these parts (names as for --only)."),
        json_out: bool = params.json_flag("the check report (check.json)"),
    ) -> None:
        """Run every part of the pre-flight the migration file enables (the parts are listed under --only, in the
        order they run) and judge every go/no-go item of docs/checklist.md: one run directory, report.html (offline)
        and report.md.

        Exit 0: go; 1: no-go, or incomplete (a required item could not run); 2: bad input.

        Example: switchover check switchover.yaml
        """
        from switchover.check.runner import CheckRun, is_milestone
        from switchover.config import load_migration
        from switchover.config.check import CheckSection

        m = load_migration(config)
        settings = (m.check or CheckSection()).model_copy(deep=True)
        for name in [*(only or []), *(skip or [])]:
            if name not in NAMES:
                raise BadInput(f"unknown part {name!r}", hint=f"parts: {', '.join(NAMES)}")
        left_out = {
            name: "left out by --only" if only and name not in only else "skipped by --skip"
            for name in NAMES
            if (only and name not in only) or (skip and name in skip)
        }
        with err_console.status("check: starting ...") as status:

            def on_event(part: str, msg: str) -> None:
                if is_milestone(msg):
                    err_console.print(f"[bold]{part}[/]: {msg}", highlight=False, soft_wrap=True)
                status.update(f"{part}: {msg[:100]}")

            runner = CheckRun(m, settings, config_path=config, runs_dir=runs_dir, on_event=on_event, left_out=left_out)
            report, rd = run(runner.run(), hot=True)
        if json_out:
            print_json(report)
        else:
            render(report, rd.file("report.html"))
        exit_for(report)
