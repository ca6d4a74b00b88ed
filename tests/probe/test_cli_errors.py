"""CLI contract for probe, verify, diff-model and cachekey: exit codes and one-line errors, never a traceback."""

from __future__ import annotations

import sys
from dataclasses import dataclass
from pathlib import Path

import pytest

from switchover.cli.app import main


@dataclass
class Result:
    returncode: int
    stdout: str
    stderr: str


@pytest.fixture
def run_cli(monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]):
    def _run(*args: str) -> Result:
        monkeypatch.setattr(sys, "argv", ["switchover", *args])
        with pytest.raises(SystemExit) as exc:
            main()
        out = capsys.readouterr()
        return Result(int(exc.value.code or 0), out.out, out.err)

    return _run


@pytest.mark.parametrize(
    ("args", "code", "needle"),
    [
        (["probe"], 2, "give a URL"),
        (["probe", "http://x", "--old", "http://y"], 2, "not both"),
        (["probe", "ftp://x"], 2, "http://"),
        (["probe", "http://127.0.0.1:9", "--only", "nope"], 2, "unknown probe"),
        (["probe", "http://127.0.0.1:9", "--only", "finish.length"], 3, "partial report"),
        (
            ["verify", "--old", "http://127.0.0.1:9", "--new", "http://127.0.0.1:9", "--no-long-inputs"],
            3,
            "cannot connect",
        ),
        (["verify", "--old", "http://a", "--new", "http://b", "--prompts", "/nonexistent.jsonl"], 2, "no such file"),
        (["diff-model", "/nonexistent", "/nonexistent2"], 2, "no such file"),
        (["diff-model", "/tmp", "/tmp", "--old-engine", "vllm"], 2, "both --old-engine and --new-engine"),
        (["cachekey", "/nonexistent", "--model-id", "m", "--prompt", "x"], 2, "no such file"),
        (["cachekey", "/tmp", "--model-id", "m"], 2, "exactly one of --prompt"),
    ],
)
def test_bad_input_and_unreachable_end_with_one_line_and_exit_code(
    run_cli, args: list[str], code: int, needle: str
) -> None:
    p = run_cli(*args)
    assert p.returncode == code, p.stderr
    assert needle in p.stderr + p.stdout
    assert "Traceback" not in p.stderr


def test_probe_list_shows_at_least_20_probes(run_cli) -> None:
    p = run_cli("probe", "--list")
    assert p.returncode == 0
    assert p.stdout.count("stop.") >= 3 and "tools.stream" in p.stdout


def test_unreadable_model_dir_is_exit_2(run_cli, tmp_path: Path) -> None:
    d = tmp_path / "m"
    d.mkdir()
    (d / "tokenizer.json").write_text("{")
    (d / "model.safetensors").write_bytes(b"\x00")
    p = run_cli("diff-model", str(d), str(d), "--no-weights")
    assert p.returncode == 2 and "malformed JSON" in p.stderr and "Traceback" not in p.stderr
