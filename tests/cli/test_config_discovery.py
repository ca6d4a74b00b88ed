"""Every verb that can read the migration file finds ./switchover.yaml the same way when none is named."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.cli.runner import run_cli

MIGRATION = "old: {url: 'http://127.0.0.1:1', engine: vllm}\nnew: {url: 'http://127.0.0.1:2', engine: llamacpp}\n"


@pytest.mark.parametrize(
    "argv",
    [
        ["probe", "--budget-s", "1"],
        ["verify", "--structured", "0", "--no-long-inputs"],
        ["bench", "--requests", "1", "--no-calibrate", "--runs-dir", "out"],
    ],
)
def test_live_verbs_read_the_migration_file_in_the_current_folder(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, argv: list[str]
) -> None:
    monkeypatch.chdir(tmp_path)
    code, _, err, _ = run_cli(argv)
    assert code == 2 and "give" in err  # nothing named, nothing found: the usage line, as before
    (tmp_path / "switchover.yaml").write_text(MIGRATION)
    code, _, err, _ = run_cli(argv)
    assert code == 3, err  # it reached for the file's endpoints (closed ports): unreachable, not a usage error
    assert "using ./switchover.yaml" in err and "127.0.0.1:1" in err


def test_check_and_validate_default_to_the_file_in_the_current_folder(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    code, _, err, _ = run_cli(["validate"])
    assert code == 2 and "switchover.yaml: no such file" in err
    (tmp_path / "switchover.yaml").write_text(MIGRATION)
    code, out, _, _ = run_cli(["validate"])
    assert code == 0 and "ok switchover.yaml" in out
    code, _, err, _ = run_cli(["check", "--only", "plan", "--runs-dir", "out"])
    assert code in (0, 1), err
    assert any((tmp_path / "out").iterdir())
