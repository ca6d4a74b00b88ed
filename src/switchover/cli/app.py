"""The `switchover` command: one typer app, one sub-module per verb."""

from __future__ import annotations

import sys

import typer

from switchover import __version__
from switchover.cli import (
    bench_cmd,
    check_cmd,
    config_cmd,
    demo_cmd,
    doctor_cmd,
    drill_cmd,
    export_cmd,
    gateway_cmd,
    hw_cmd,
    model_cmd,
    plan_cmd,
    probe_cmd,
    ready_cmd,
    report_cmd,
    rollout_cmd,
    testbed_cmd,
    verify_cmd,
)
from switchover.cli.common import err_console
from switchover.errors import ExitCode, SwitchoverError

app = typer.Typer(
    name="switchover",
    help="Change the engine, model or GPU behind an LLM API as a measured, reversible operation.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
    rich_markup_mode="rich",
)


def _version(value: bool) -> None:
    if value:
        typer.echo(f"switchover {__version__}")
        raise typer.Exit()


@app.callback()
def _root(
    version: bool = typer.Option(False, "--version", callback=_version, is_eager=True, help="Print the version."),
) -> None:
    """Change the engine, model or GPU behind an LLM API as a measured, reversible operation."""


# registered in the order of a real migration, so `--help` reads as the product does
app.add_typer(plan_cmd.app, name="plan")
app.add_typer(hw_cmd.app, name="hw")
probe_cmd.register(app)
verify_cmd.register(app)
model_cmd.register(app)  # diff-model, cachekey
bench_cmd.register(app)
ready_cmd.register(app)
gateway_cmd.register(app)  # gateway, metrics-adapter
app.add_typer(rollout_cmd.app, name="rollout")
drill_cmd.register(app)
doctor_cmd.register(app)
check_cmd.register(app)
report_cmd.register(app)
demo_cmd.register(app)
app.add_typer(export_cmd.app, name="export")
config_cmd.register(app)  # validate, schema
app.add_typer(testbed_cmd.app, name="testbed")

def main() -> None:
    """Console-script entry: user errors become one line on stderr and an exit code, never a traceback."""
    try:
        app()
    except SwitchoverError as exc:
        err_console.print(f"[bold red]error:[/] {exc.message}", highlight=False, soft_wrap=True)
        if exc.hint:
            err_console.print(f"[dim]hint:[/] {exc.hint}", highlight=False, soft_wrap=True)
        sys.exit(int(exc.exit_code))
    except KeyboardInterrupt:
        err_console.print("interrupted")
        sys.exit(130)
    sys.exit(int(ExitCode.OK))
