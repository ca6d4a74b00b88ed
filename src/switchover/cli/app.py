"""The `switchover` command: one typer app, one sub-module per verb."""

from __future__ import annotations

import functools
import importlib
import os
import sys
from typing import Any

import typer
import typer.core
import typer.main
from rich.text import Text

from switchover import __version__
from switchover.cli import (
    alerts_cmd,
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
    overload_cmd,
    plan_cmd,
    probe_cmd,
    ready_cmd,
    report_cmd,
    review_cmd,
    rollout_cmd,
    testbed_cmd,
    verify_cmd,
)
from switchover.cli.common import err_console
from switchover.errors import INTERNAL_ERROR, ExitCode, SwitchoverError
from switchover.redaction import redact

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
overload_cmd.register(app)
verify_cmd.register(app)
model_cmd.register(app)  # diff-model, cachekey
bench_cmd.register(app)
ready_cmd.register(app)
gateway_cmd.register(app)  # gateway, metrics-adapter
app.add_typer(rollout_cmd.app, name="rollout")
app.add_typer(alerts_cmd.app, name="alerts")
app.add_typer(review_cmd.app, name="review")
drill_cmd.register(app)
doctor_cmd.register(app)
check_cmd.register(app)
report_cmd.register(app)
demo_cmd.register(app)
app.add_typer(export_cmd.app, name="export")
config_cmd.register(app)  # validate, schema
app.add_typer(testbed_cmd.app, name="testbed")

# the click typer runs on: vendored as typer._click in recent typer, the `click` package before
_click: Any = getattr(typer.core, "_click", None) or importlib.import_module("click")
_ABORTS: tuple[type[BaseException], ...] = (KeyboardInterrupt, typer.Abort, *(
    [_click.exceptions.Abort] if hasattr(_click.exceptions, "Abort") else []))

MAX_MESSAGE = 2000  # characters of an error line; a huge echoed value is cut, not printed


def _one_line(text: str) -> str:
    """A message as one line, secrets masked, length bounded."""
    line = " ".join(redact(str(text)).split())
    return line if len(line) <= MAX_MESSAGE else line[: MAX_MESSAGE - 1] + "…"


def report_error(message: str, hint: str | None = None) -> None:
    """The one error line (plus an optional hint line) on stderr; user text is never read as rich markup."""
    err_console.print(Text.assemble(("error:", "bold red"), " ", _one_line(message)), highlight=False,
                      soft_wrap=True)
    if hint:
        err_console.print(Text.assemble(("hint:", "dim"), " ", _one_line(hint)), highlight=False, soft_wrap=True)


def _usage_error(exc: Any) -> int:
    ctx = exc.ctx
    path = ctx.command_path if ctx is not None else "switchover"
    if isinstance(exc, _click.exceptions.NoArgsIsHelpError):
        help_text = ctx.get_help() if ctx is not None else ""
        if help_text:
            sys.stdout.write(help_text + "\n")
        report_error(f"`{path}` needs a command or arguments (the help is above)")
        return int(ExitCode.BAD_INPUT)
    report_error(exc.format_message(), hint=f"`{path} --help` shows every option, with an example")
    return int(ExitCode.BAD_INPUT)


@functools.cache
def _command() -> Any:
    """The click command tree, built once per process (typer builds it anew on every call otherwise)."""
    return typer.main.get_command(app)


def invoke(argv: list[str]) -> int:
    """Run the CLI on `argv` and return the exit code; user errors become one line on stderr, never a traceback.

    0 ok, 1 a gate or check failed, 2 bad input, 3 unreachable, 130 interrupted; a bug prints one line and 70.
    """
    try:
        result = _command().main(args=argv, prog_name="switchover", standalone_mode=False)
        return result if isinstance(result, int) and not isinstance(result, bool) else int(ExitCode.OK)
    except SwitchoverError as exc:
        report_error(exc.message, exc.hint)
        return int(exc.exit_code)
    except _click.exceptions.UsageError as exc:
        return _usage_error(exc)
    except _click.exceptions.ClickException as exc:  # FileError and friends: a path the user gave
        report_error(exc.format_message())
        return int(ExitCode.BAD_INPUT)
    except SystemExit as exc:
        code = exc.code
        if code is None:
            return int(ExitCode.OK)
        if isinstance(code, int):
            return code
        report_error(str(code))
        return int(ExitCode.FAILED)
    except _ABORTS:
        err_console.print("interrupted", highlight=False)
        return 130
    except BrokenPipeError:  # `switchover ... | head`: the reader left, nothing to report
        return int(ExitCode.OK)
    except OSError as exc:
        if exc.filename is None:
            return _bug(exc)
        # a path the user named that the system refused (too long, not a folder, permission): their input
        report_error(f"cannot use {exc.filename}: {exc.strerror or exc}")
        return int(ExitCode.BAD_INPUT)
    except Exception as exc:  # a bug: one line, and the traceback only on request
        return _bug(exc)


def _bug(exc: Exception) -> int:
    if os.environ.get("SWITCHOVER_DEBUG"):
        raise exc
    report_error(f"internal error (a bug in switchover): {type(exc).__name__}: {exc}",
                 hint="rerun with SWITCHOVER_DEBUG=1 for the traceback, and please report it")
    return INTERNAL_ERROR


def main() -> None:
    """Console-script entry: `invoke` on the process arguments, then exit with its code."""
    sys.exit(invoke(sys.argv[1:]))
