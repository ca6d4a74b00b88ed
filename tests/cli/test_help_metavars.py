"""Issue 26: help pages name an option's value in the user's words (`--timeout-s SECONDS`, `--config FILE`,
`--engine ENGINE[@VERSION]`), never typer's Python types (`<bool>`, `<str>`, `<list[str]>`, `<path>`)."""

from __future__ import annotations

import contextlib
import io
import re
from pathlib import Path

import pytest
import typer
import typer.main

from switchover.cli import verbs
from tests.cli.runner import run_cli
from tests.cli.test_help_and_random_argv import PATHS

PYTHON_TYPE = re.compile(r"<(?:bool|str|int|float|path|Path|text|dict|tuple|datetime|uuid)\b[^<>]*>|<list\[")


@pytest.mark.parametrize("path", ["", *PATHS])
def test_no_help_page_shows_a_python_type_as_a_metavar(path: str) -> None:
    code, out, err, _ = run_cli([*path.split(), "--help"])
    assert code == 0, err
    assert PYTHON_TYPE.findall(out) == [], out


def _help_of(command: typer.Typer) -> str:
    """The help page of a one-command app after name_metavars (rich prints it to stdout)."""
    built = typer.main.get_command(command)
    verbs.name_metavars(built, ["-h", "--help"])
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        built.main(args=["--help"], prog_name="x", standalone_mode=False)
    return out.getvalue()


def test_a_value_is_named_by_its_unit_or_shared_word_or_option_name_and_a_flag_by_nothing() -> None:
    app = typer.Typer(rich_markup_mode="rich")

    @app.command()
    def run(
        rules: Path = typer.Argument(..., help="r"),
        timeout_s: float = typer.Option(1.0, "--timeout-s"),
        config: Path = typer.Option(None, "--config", "-c"),
        engine: str = typer.Option("vllm", "--engine"),
        max_tokens: int = typer.Option(1, "--max-tokens"),
        tools: list[str] = typer.Option(None, "--tools"),
        only: str = typer.Option(None, "--only", metavar="PART[,PART]"),
        json_out: bool = typer.Option(False, "--json"),
    ) -> None:
        """Run."""

    shown = _help_of(app)
    for name, word in (
        ("--timeout-s", "SECONDS"),
        ("--config", "FILE"),
        ("--engine", "ENGINE[@VERSION]"),
        ("--max-tokens", "MAX_TOKENS"),
        ("--tools", "TOOLS"),
        ("--only", "PART[,PART]"),
    ):
        assert re.search(re.escape(name) + r"[\s│-]+(?:-c\s+)?" + re.escape(word), shown), (name, word, shown)
    assert "RULES" in shown
    assert PYTHON_TYPE.findall(shown) == []
    assert re.search(r"--json\s+│$", shown, re.M), shown  # a flag takes no value: nothing beside it
