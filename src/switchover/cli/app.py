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

from switchover.cli.verbs import Verb, VerbGroup
from switchover.errors import INTERNAL_ERROR, ExitCode, SwitchoverError

# every verb, in the order of a real migration so that `--help` reads as the product does (the commands first, then
# the groups: the order typer lists them in); a verb's module is imported only when that verb is used
VERBS = (
    Verb("probe", "switchover.cli.probe_cmd"),
    Verb("overload", "switchover.cli.overload_cmd"),
    Verb("verify", "switchover.cli.verify_cmd"),
    Verb("diff-model", "switchover.cli.model_cmd"),
    Verb("cachekey", "switchover.cli.model_cmd"),
    Verb("ready", "switchover.cli.ready_cmd"),
    Verb("metrics-adapter", "switchover.cli.gateway_cmd"),
    Verb("drill", "switchover.cli.drill_cmd"),
    Verb("doctor", "switchover.cli.doctor_cmd"),
    Verb("check", "switchover.cli.check_cmd"),
    Verb("report", "switchover.cli.report_cmd"),
    Verb("demo", "switchover.cli.demo_cmd"),
    Verb("validate", "switchover.cli.config_cmd"),
    Verb("schema", "switchover.cli.config_cmd"),
    Verb("plan", "switchover.cli.plan_cmd", group=True),
    Verb("hw", "switchover.cli.hw_cmd", group=True),
    Verb("bench", "switchover.cli.bench_cmd", group=True),
    Verb("gateway", "switchover.cli.gateway_cmd", group=True),
    Verb("rollout", "switchover.cli.rollout_cmd", group=True),
    Verb("alerts", "switchover.cli.alerts_cmd", group=True),
    Verb("review", "switchover.cli.review_cmd", group=True),
    Verb("export", "switchover.cli.export_cmd", group=True),
    Verb("testbed", "switchover.cli.testbed_cmd", group=True),
)

# what every verb is built with (the root's own settings; `-h` is `--help` everywhere, sub-commands inherit it)
SETTINGS: dict[str, Any] = {
    "add_completion": True,
    "pretty_exceptions_enable": False,
    "rich_markup_mode": "rich",
    "context_settings": {"help_option_names": ["-h", "--help"]},
}


class _Root(VerbGroup):
    verbs = VERBS
    settings = SETTINGS


app = typer.Typer(
    name="switchover",
    help="Change the engine, model or GPU behind an LLM API as a measured, reversible operation.",
    no_args_is_help=True,
    cls=_Root,
    **SETTINGS,
)


def _version(value: bool) -> None:
    if value:
        from switchover import __version__

        typer.echo(f"switchover {__version__}")
        raise typer.Exit()


@app.callback()
def _root(
    version: bool = typer.Option(False, "--version", callback=_version, is_eager=True, help="Print the version."),
) -> None:
    """Change the engine, model or GPU behind an LLM API as a measured, reversible operation."""


# the click typer runs on: vendored as typer._click in recent typer, the `click` package before
_click: Any = getattr(typer.core, "_click", None) or importlib.import_module("click")
_ABORTS: tuple[type[BaseException], ...] = (
    KeyboardInterrupt,
    typer.Abort,
    *([_click.exceptions.Abort] if hasattr(_click.exceptions, "Abort") else []),
)

MAX_MESSAGE = 2000  # characters of an error line; a huge echoed value is cut, not printed


def _one_line(text: str) -> str:
    """A message as one line, secrets masked, length bounded."""
    from switchover.redaction import redact

    line = " ".join(redact(str(text)).split())
    return line if len(line) <= MAX_MESSAGE else line[: MAX_MESSAGE - 1] + "…"


def report_error(message: str, hint: str | None = None) -> None:
    """The one error line (plus an optional hint line) on stderr; user text is never read as rich markup."""
    from rich.text import Text

    from switchover.cli.common import err_console

    err_console.print(Text.assemble(("error:", "bold red"), " ", _one_line(message)), highlight=False, soft_wrap=True)
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
    from switchover.cli.verbs import help_names, name_metavars

    command = typer.main.get_command(app)
    name_metavars(command, help_names(SETTINGS), nested=False)  # typer adds the completion options last
    return command


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
        from switchover.cli.common import err_console

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
    report_error(
        f"internal error (a bug in switchover): {type(exc).__name__}: {exc}",
        hint="rerun with SWITCHOVER_DEBUG=1 for the traceback, and please report it",
    )
    return INTERNAL_ERROR


def main() -> None:
    """Console-script entry: `invoke` on the process arguments, then exit with its code."""
    sys.exit(invoke(sys.argv[1:]))
