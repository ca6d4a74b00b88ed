"""The house style is checked where the tests run (issue 25): `ruff check`, `ruff format --check` over every Python
file, and `mypy --strict` over the foundation packages that every verb builds on (wire, engines, model, hardware,
config, measure, evidence). A failure prints the tool's own report."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
PY_TREES = ["src", "tests", "bench", "scripts"]
STRICT = ["measure", "wire", "evidence", "engines", "model", "hardware", "config"]


def _tool(name: str) -> list[str]:
    if shutil.which(name) is None:
        pytest.fail(f"{name} is not installed: `pip install -e '.[dev]'` installs it")
    return [name]


def _run(argv: list[str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(argv, cwd=ROOT, capture_output=True, text=True, timeout=600, check=False)


def test_ruff_check_passes() -> None:
    r = _run([*_tool("ruff"), "check", *PY_TREES])
    assert r.returncode == 0, r.stdout[-4000:] + r.stderr[-2000:]


def test_every_python_file_is_ruff_formatted() -> None:
    r = _run([*_tool("ruff"), "format", "--check", *PY_TREES])
    assert r.returncode == 0, "run `ruff format src tests bench scripts`:\n" + r.stdout[-4000:] + r.stderr[-2000:]


def test_the_foundation_packages_are_mypy_strict() -> None:
    r = _run([sys.executable, "-m", "mypy", "--strict", *(f"src/switchover/{p}" for p in STRICT)])
    assert r.returncode == 0, r.stdout[-4000:] + r.stderr[-2000:]
