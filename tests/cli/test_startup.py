"""Issue 26, a fast start: the CLI imports a verb's module (and the libraries behind it) only when that verb is used,
the root help reads the verbs' summaries without importing them yet lists exactly what the loaded commands say, and
`-h` is `--help` everywhere. Structural checks only (which modules a start imports), no timing asserts."""

from __future__ import annotations

import contextlib
import io
import json
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any, ClassVar

import pytest
import typer

from switchover.cli import verbs
from switchover.cli.app import VERBS, app
from tests.cli import cases as C
from tests.cli.runner import run_cli

HEAVY = ("pandas", "scipy", "numpy", "pyarrow", "matplotlib", "aiohttp", "httpx", "duckdb", "uvloop")

_IMPORTS = """
import contextlib, io, json, sys
from switchover.cli.app import invoke
out = io.StringIO()
with contextlib.redirect_stdout(out):
    code = invoke(sys.argv[1:])
json.dump({"code": code, "out": out.getvalue(), "modules": sorted(sys.modules)}, sys.stdout)
"""


def _start(*argv: str) -> dict[str, Any]:
    """`switchover ARGV` in a fresh interpreter: exit code, stdout and every module it imported."""
    done = subprocess.run(
        [sys.executable, "-c", _IMPORTS, *argv], capture_output=True, text=True, timeout=120, check=False
    )
    return dict(json.loads(done.stdout))


def _verb_modules(modules: list[str]) -> set[str]:
    return {m for m in modules if m.startswith("switchover.cli.") and m.endswith("_cmd")}


def _heavy(modules: list[str]) -> set[str]:
    return {m.split(".")[0] for m in modules} & set(HEAVY)


def test_importing_the_cli_imports_no_verb_and_no_heavy_library() -> None:
    done = subprocess.run(
        [sys.executable, "-c", "import json, sys, switchover.cli.app; json.dump(sorted(sys.modules), sys.stdout)"],
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
    )
    modules = json.loads(done.stdout)
    assert _verb_modules(modules) == set()
    assert _heavy(modules) == set()


@pytest.mark.parametrize("argv", [["--version"], ["--help"], ["-h"], []])
def test_version_and_root_help_import_no_verb(argv: list[str]) -> None:
    started = _start(*argv)
    assert started["code"] == (2 if not argv else 0)
    assert _verb_modules(started["modules"]) == set()
    assert _heavy(started["modules"]) == set()
    assert ("switchover " in started["out"]) if argv == ["--version"] else ("plan" in started["out"])


@pytest.mark.parametrize("verb", ["plan", "probe", "check"])
def test_a_verb_imports_its_own_module_and_no_other_top_level_verb(verb: str) -> None:
    started = _start(verb, "--help")
    assert started["code"] == 0
    own = {v.module for v in VERBS if v.name == verb}
    others = {v.module for v in VERBS} - own
    assert own <= set(started["modules"])
    # a verb may compose helpers of its own (plan imports its choose/translate modules), never another verb
    assert _verb_modules(started["modules"]) & others == set()


def test_plan_help_imports_no_dataframe_or_plotting_library() -> None:
    started = _start("plan", "capacity", "--help")
    assert started["code"] == 0
    assert _heavy(started["modules"]) & {"pandas", "scipy", "pyarrow", "matplotlib", "duckdb"} == set()


# the machinery behind a planning command; its help needs none of it (plan --help took 0.40 s importing it)
PLANNING = ("switchover.engines", "switchover.plan", "switchover.hardware", "switchover.model")


@pytest.mark.parametrize(
    "argv",
    [["plan", "--help"], ["plan", "choose", "--help"], ["plan", "translate", "--help"], ["plan", "capacity", "--help"]],
)
def test_plan_help_imports_no_planning_machinery(argv: list[str]) -> None:
    started = _start(*argv)
    assert started["code"] == 0 and "Example" in started["out"]
    assert [m for m in started["modules"] if m.startswith(PLANNING)] == []


# what a verb's --help needs none of: its machinery, imported by the command when it runs
MACHINERY = [
    (["alerts", "--help"], ("switchover.alerts",)),
    (["alerts", "translate", "--help"], ("switchover.alerts",)),
    (["probe", "--help"], ("switchover.probe", "switchover.engines", "switchover.config")),
    (["verify", "--help"], ("switchover.verify", "switchover.probe", "switchover.config")),
    (["ready", "--help"], ("switchover.wire.readiness", "switchover.engines")),
    (["validate", "--help"], ("switchover.config",)),
    (["schema", "--help"], ("switchover.config", "switchover.outputs")),
    (["testbed", "--help"], ("switchover.testbed.processes", "switchover.testbed.install", "switchover.runs")),
    (["testbed", "up", "--help"], ("switchover.testbed.processes", "switchover.runs")),
    (["rollout", "--help"], ("switchover.rollout.controller", "switchover.rollout.compare", "scipy", "aiohttp")),
    (["rollout", "abandon", "--help"], ("switchover.rollout.controller", "switchover.rollout.holding", "scipy")),
    (["drill", "--help"], ("switchover.drill", "switchover.warmup", "aiohttp")),
]


@pytest.mark.parametrize(("argv", "machinery"), MACHINERY, ids=[" ".join(a[:-1]) for a, _ in MACHINERY])
def test_a_verb_help_imports_none_of_its_machinery(argv: list[str], machinery: tuple[str, ...]) -> None:
    started = _start(*argv)
    assert started["code"] == 0 and "Example" in started["out"]
    assert [m for m in started["modules"] if m.startswith(machinery)] == []


def test_a_literal_read_from_source_equals_the_imported_value() -> None:
    from switchover.engines import features, names

    assert verbs.literal("switchover.engines.features", "FEATURES") == features.FEATURES
    assert verbs.literal("switchover.engines.features", "API_FIELDS") == features.API_FIELDS
    assert verbs.literal("switchover.engines.features", "FeatureFact") is features.FeatureFact  # not a literal
    assert verbs.literal("switchover.engines.names", "ENGINES") == names.ENGINES  # an annotated assignment


def _root_help(group: Any) -> str:
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        group.main(args=["--help"], prog_name="switchover", standalone_mode=False)
    return out.getvalue()


def test_root_help_read_from_source_equals_root_help_of_the_loaded_commands() -> None:
    lazy = typer.main.get_command(app)
    from_source = _root_help(lazy)
    loaded = typer.main.get_command(app)
    assert len(dict(loaded.commands)) == len(VERBS)  # type: ignore[attr-defined]  # builds every verb
    assert from_source == _root_help(loaded)
    assert all(v.name in from_source for v in VERBS)


def test_every_verb_has_a_summary_readable_without_importing_it() -> None:
    assert {v.name: verbs.summary(v) is not None for v in VERBS} == {v.name: True for v in VERBS}


def test_the_verb_table_names_every_top_level_command_its_modules_add() -> None:
    added: dict[str, Any] = {}
    for verb in VERBS:
        added |= verbs.build(verb, {"rich_markup_mode": "rich"})
    assert sorted(added) == sorted(v.name for v in VERBS)
    assert len({v.name for v in VERBS}) == len(VERBS)


def test_an_unknown_verb_is_bad_input_with_a_suggestion() -> None:
    code, _out, err, _ = run_cli(["chek"])
    assert code == 2
    assert "Did you mean 'check'" in err


@pytest.mark.parametrize("path", sorted({"", *C.commands()}))
def test_dash_h_prints_the_same_help_as_dash_dash_help(path: str) -> None:
    long = run_cli([*path.split(), "--help"])
    short = run_cli([*path.split(), "-h"])
    assert (short[0], short[1], short[2]) == (long[0], long[1], long[2]) == (0, long[1], "")
    assert "-h" in long[1]


_SOURCES = {
    "decorated": '''
        def register(app):
            @app.command()
            def say_hello():
                """Say hello.

                More text."""
        ''',
    "named": '''
        def register(app):
            @app.command("hi")
            def hello():
                """Greet."""
        ''',
    "keyword": '''
        def register(app):
            @app.command(name="hi")
            def hello():
                """Keyword-named."""
        ''',
    "called": '''
        def adapter():
            """Adapt metrics."""

        def register(root):
            root.command("hi")(adapter)
        ''',
    "explicit_help": '''
        def register(app):
            @app.command("hi", help="Given help.")
            def hello():
                """Docstring."""
        ''',
    "group_help": '''
        import typer
        app = typer.Typer(help="Group help.\\n\\nExample: x", no_args_is_help=True)

        @app.callback()
        def main():
            """Callback doc."""
        ''',
    "group_callback": '''
        import typer
        app = typer.Typer(invoke_without_command=True)

        @app.callback()
        def main():
            """Callback doc."""
        ''',
}


@pytest.mark.parametrize(
    ("source", "name", "group", "expected"),
    [
        ("decorated", "say-hello", False, "Say hello.\n\nMore text."),
        ("named", "hi", False, "Greet."),
        ("keyword", "hi", False, "Keyword-named."),
        ("keyword", "hello", False, None),
        ("called", "hi", False, "Adapt metrics."),
        ("named", "other", False, None),
        ("explicit_help", "hi", False, None),
        ("group_help", "g", True, "Group help.\n\nExample: x"),
        ("group_callback", "g", True, "Callback doc."),
    ],
)
def test_a_summary_is_the_docstring_typer_would_show_or_none_when_the_source_is_not_plain(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, source: str, name: str, group: bool, expected: str | None
) -> None:
    module = f"startup_verb_{source}"
    (tmp_path / f"{module}.py").write_text(textwrap.dedent(_SOURCES[source]))
    monkeypatch.syspath_prepend(str(tmp_path))
    assert verbs.summary(verbs.Verb(name, module, group=group)) == expected


def test_a_missing_module_has_no_summary() -> None:
    assert verbs.summary(verbs.Verb("x", "switchover.cli.no_such_cmd")) is None


def test_root_help_builds_a_verb_whose_source_does_not_say_its_help_plainly(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (tmp_path / "startup_verb_fallback.py").write_text(textwrap.dedent(_SOURCES["explicit_help"]))
    monkeypatch.syspath_prepend(str(tmp_path))

    class Root(verbs.VerbGroup):
        verbs = (verbs.Verb("hi", "startup_verb_fallback"),)
        settings: ClassVar[dict[str, Any]] = {"rich_markup_mode": "rich"}

    root = typer.Typer(cls=Root, rich_markup_mode="rich")

    @root.callback()
    def _main() -> None:
        """Root."""

    out = _root_help(typer.main.get_command(root))
    assert "Given help." in out
    assert "Docstring." not in out


def test_shell_completion_names_verbs_subcommands_and_options() -> None:
    import os
    import subprocess
    import sys

    def complete(words: str, cword: int) -> list[str]:
        env = {**os.environ, "_SWITCHOVER_COMPLETE": "complete_bash", "COMP_WORDS": words, "COMP_CWORD": str(cword)}
        done = subprocess.run([sys.executable, "-m", "switchover"], env=env, capture_output=True, text=True, timeout=60)
        return done.stdout.split()

    assert "plan" in complete("switchover pl", 1)
    assert {"card", "capacity", "canary"} <= set(complete("switchover plan ca", 2))
    assert "--gpu" in complete("switchover plan capacity --g", 3)
