"""The parts of `check` are one table (check/registry.py): the config section, the CLI and docs/check.md follow it."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from switchover.check.registry import BY_NAME, NAMES, PARTS, PartSpec
from switchover.config.check import CheckSection

DOC = Path(__file__).resolve().parents[2] / "docs" / "check.md"


def _doc_rows() -> list[tuple[str, str]]:
    text = DOC.read_text(encoding="utf-8")
    table = text.split("### Parts (in this order)", 1)[1].split("\n\n| part |", 1)[1].split("\n\n", 1)[0]
    rows = [line.split("|") for line in table.splitlines() if line.startswith("| `")]
    return [(cells[1].strip().strip("`"), cells[4].strip()) for cells in rows]


def test_docs_parts_table_lists_the_registry_in_order_with_its_live_column() -> None:
    rows = _doc_rows()
    assert [name for name, _ in rows] == list(NAMES)
    for name, live in rows:
        assert live.startswith("yes") == BY_NAME[name].live, name


def test_every_part_in_the_registry_has_a_check_section() -> None:
    assert set(NAMES) <= set(CheckSection.model_fields)


def test_check_help_names_every_part_from_the_registry() -> None:
    from typer.testing import CliRunner

    from switchover.cli.app import app

    out = CliRunner().invoke(app, ["check", "--help"], terminal_width=200).output
    assert all(name in " ".join(out.split()) for name in NAMES)


@pytest.mark.parametrize("part", PARTS, ids=lambda p: p.name)
def test_each_part_says_what_it_needs(part: PartSpec) -> None:
    assert re.fullmatch(r"[a-z_]+", part.name) and part.title and part.needs


def test_the_diff_model_part_says_it_is_missing_its_folders() -> None:
    assert BY_NAME["diff_model"].missing_input(CheckSection()) == "no model files given (check.diff_model.old / new)"
    assert BY_NAME["probe"].missing_input(CheckSection()) is None


async def test_a_part_starting_is_announced_with_its_registry_title(tmp_path: Path) -> None:
    from switchover.check.runner import CheckRun
    from switchover.config import load_migration
    from switchover.testbed.processes import free_port

    cfg = tmp_path / "switchover.yaml"
    cfg.write_text(
        f"old: {{url: 'http://127.0.0.1:{free_port()}', engine: vllm}}\n"
        f"new: {{url: 'http://127.0.0.1:{free_port()}', engine: llamacpp}}\n"
    )
    m = load_migration(cfg)
    events: list[tuple[str, str]] = []
    left_out = {name: "left out by --only" for name in NAMES if name != "plan"}
    await CheckRun(
        m, CheckSection(), config_path=cfg, left_out=left_out, on_event=lambda part, msg: events.append((part, msg))
    ).run()
    assert ("plan", f"running: {BY_NAME['plan'].title}") in events
    assert not any(part == "check" and "unreachable" in msg for part, msg in events)  # no live part: no discovery
