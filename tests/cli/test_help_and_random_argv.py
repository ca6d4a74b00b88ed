"""Every command and group shows an example in its --help; random command lines (hypothesis) never end in a
traceback, an internal error or an exit code outside the documented ones."""

from __future__ import annotations

from typing import Any

import pytest
import typer.main
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from switchover.cli.app import app
from tests.cli import cases as C
from tests.cli.runner import HUNG, run_cli


def _groups(cmd: Any, path: list[str]) -> list[str]:
    subs = getattr(cmd, "commands", None)
    if subs is None:
        return []
    out = [" ".join(path)] if path else []
    for name, sub in subs.items():
        out += _groups(sub, [*path, name])
    return out


PATHS = sorted(set(C.commands()) | set(_groups(typer.main.get_command(app), [])))


@pytest.mark.parametrize("path", PATHS)
def test_every_help_has_an_example(path: str) -> None:
    code, out, err, _ = run_cli([*path.split(), "--help"])
    assert code == 0, err
    assert "Example" in out


# side-effect free verbs only (nothing here may start a server, install, or run a shell command)
SAFE = [
    "plan card",
    "plan capacity",
    "plan parallel",
    "plan canary",
    "plan translate",
    "plan grace",
    "hw gpus",
    "hw diff",
    "validate",
    "doctor",
    "export argo",
    "export envoy",
    "export grafana",
    "ready",
    "cachekey",
    "report",
    "bench report",
    "bench recompute",
    "schema",
]
WORDS = st.sampled_from(
    [
        "-m",
        "--model",
        "--gpu",
        "H100-80G",
        "--gpus",
        "--tp",
        "--context",
        "--max-model-len",
        "--json",
        "--from",
        "--to",
        "vllm",
        "sglang",
        "-c",
        "--out",
        "--port",
        "--weight",
        "--max-ms",
        "--max-tokens",
        "--tpot-p99-ms",
        "--scan",
        "--limit",
        "--",
        "-",
        "nan",
        "inf",
        "0",
        "-1",
        "8",
        "1e308",
        "http://127.0.0.1:1",
        "http://",
        "catalog:H100-80G",
        "/proc",
        "/proc/version",
        "does-not-exist",
        "@/proc/version",
        "[x]",
        "",
    ]
)
ARGV = st.tuples(st.sampled_from(SAFE), st.lists(st.one_of(WORDS, st.text(max_size=12)), max_size=8))


@pytest.fixture(autouse=True)
def _in_a_scratch_folder(tmp_path: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    """Outputs named by relative paths (`--out does-not-exist`) land in a scratch folder."""
    monkeypatch.chdir(tmp_path)


@settings(max_examples=400, deadline=None, derandomize=True, suppress_health_check=list(HealthCheck))
@given(ARGV)
def test_random_command_lines_keep_the_contract(argv: tuple[str, list[str]]) -> None:
    path, rest = argv
    rest = [w for w in rest if "\x00" not in w]  # a process cannot receive NUL in argv
    code, out, err, _ = run_cli([*path.split(), *rest])
    assert code != HUNG
    assert "Traceback" not in out + err and "internal error" not in err, err[-500:]
    assert code in (0, 1, 2, 3), (code, err[-300:])
    if code == 2:
        assert sum(x.startswith("error:") for x in err.splitlines()) == 1, err[-300:]
