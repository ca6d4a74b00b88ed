"""`switchover report`: rebuild report.html and report.md of a check run from its run directory."""

from __future__ import annotations

from pathlib import Path

import typer

from switchover.cli import params
from switchover.cli.common import print_json
from switchover.errors import BadInput


def register(app: typer.Typer) -> None:
    @app.command()
    def report(
        run_dir: Path = typer.Argument(..., help="A check run directory (runs/<stamp>-check)."),
        json_out: bool = params.json_flag("the rebuilt check report (check.json)"),
    ) -> None:
        """Re-judge a check run from the results it kept and rewrite check.json, report.html and report.md.
        Reads only the run directory: no engine is contacted. Exits as `check` does: 0 go, 1 no-go or incomplete.

        Example: switchover report runs/20261129T120000Z-check
        """
        from switchover.check.runner import build_report, write_outputs
        from switchover.cli.check_cmd import exit_for, render
        from switchover.runs import RunDir

        rd = RunDir.open(run_dir)
        if not rd.has("config.json"):
            raise BadInput(
                f"{run_dir}: not a check run directory (no config.json)",
                hint="pass a directory written by `switchover check`",
            )
        old = rd.read_json("check") if rd.has("check.json") else {}
        rebuilt = build_report(rd, total_s=old.get("total_s"), created_wall=old.get("created_wall"))
        out = write_outputs(rd, rebuilt)
        if json_out:
            print_json(rebuilt)
        else:
            render(rebuilt, out["html"])
        exit_for(rebuilt)  # a script doing `switchover report RUN && deploy` must not deploy a no-go
