"""The CLI as a user meets it: exit codes, one-line errors, no tracebacks."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path


def _run(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "switchover", *args], capture_output=True, text=True, timeout=60)


def test_version() -> None:
    r = _run("--version")
    assert r.returncode == 0 and r.stdout.startswith("switchover ")


def test_ready_on_a_closed_port_exits_3_with_one_line() -> None:
    r = _run("ready", "http://127.0.0.1:1")
    assert r.returncode == 3
    assert "refused" in r.stdout and "Traceback" not in r.stdout + r.stderr
    assert len(r.stdout.strip().splitlines()) == 1


def test_ready_json_names_state() -> None:
    r = _run("ready", "http://127.0.0.1:1", "--json")
    assert r.returncode == 3 and json.loads(r.stdout)["state"] == "refused"


def test_ready_rejects_bad_url_with_exit_2() -> None:
    r = _run("ready", "localhost:8000")
    assert r.returncode == 2 and "http://" in r.stderr and "Traceback" not in r.stderr


def test_validate_malformed_file_exits_2_naming_the_field(tmp_path: Path) -> None:
    p = tmp_path / "switchover.yaml"
    p.write_text("old:\n  url: http://127.0.0.1:1\n  engine: vllm\nnew:\n  url: http://127.0.0.1:2\n  engin: x\n")
    r = _run("validate", str(p))
    assert r.returncode == 2
    assert "new.engin" in r.stderr and "line 6" in r.stderr and "Traceback" not in r.stderr


def test_validate_good_file(tmp_path: Path) -> None:
    p = tmp_path / "switchover.yaml"
    p.write_text("old:\n  url: http://127.0.0.1:1\n  engine: vllm\nnew:\n  url: http://127.0.0.1:2\n  engine: tgi\n")
    r = _run("validate", str(p), "--json")
    assert r.returncode == 0 and json.loads(r.stdout)["new"]["engine"] == "tgi"


def test_schema_is_json() -> None:
    r = _run("schema")
    assert r.returncode == 0 and json.loads(r.stdout)["title"] == "Migration"


def test_unknown_testbed_model_is_bad_input(tmp_path: Path) -> None:
    r = _run("testbed", "up", "--model", "gpt-5", "--dir", str(tmp_path))
    assert r.returncode == 2 and "--model must be one of" in r.stderr
