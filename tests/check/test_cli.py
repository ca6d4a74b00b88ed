"""`switchover check` and `switchover report` as a user meets them (no engines: closed ports)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from switchover.testbed.processes import free_port


def _run(*args: str, cwd: Path | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "switchover", *args], capture_output=True, text=True, timeout=120, cwd=cwd
    )


def _config(tmp_path: Path, extra: str = "") -> Path:
    p = tmp_path / "switchover.yaml"
    p.write_text(
        f"old: {{url: 'http://127.0.0.1:{free_port()}', engine: vllm}}\n"
        f"new: {{url: 'http://127.0.0.1:{free_port()}', engine: llamacpp}}\n" + extra
    )
    return p


def test_check_with_unreachable_engines_is_incomplete_exit_1_with_a_report(tmp_path: Path) -> None:
    cfg = _config(tmp_path, "check:\n  grace: {max_tokens: 2000, drain_grace_s: 120}\n")
    r = _run("check", str(cfg), "--json")
    assert r.returncode == 1, r.stderr
    assert "Traceback" not in r.stderr
    report = json.loads(r.stdout)
    assert report["overall"] == "incomplete"
    parts = {p["part"]: p for p in report["parts"]}
    assert parts["probe"]["status"] == "failed" and "unreachable" in parts["probe"]["reason"]
    assert parts["plan"]["status"] == "ran"  # engine profiles need no live engine
    run_dir = Path(report["run_dir"])
    assert run_dir.parent == tmp_path / "runs"  # runs_dir is relative to the config file
    for name in ("check.json", "report.html", "report.md", "config.json", "parts.json"):
        assert (run_dir / name).exists(), name
    assert "not run" in (run_dir / "report.md").read_text() or "INCOMPLETE" in (run_dir / "report.md").read_text()


def test_check_rejects_an_unknown_part_with_exit_2(tmp_path: Path) -> None:
    r = _run("check", str(_config(tmp_path)), "--skip", "nonsense")
    assert r.returncode == 2 and "unknown part 'nonsense'" in r.stderr and "Traceback" not in r.stderr


def test_check_rejects_a_bad_check_section_naming_the_field(tmp_path: Path) -> None:
    r = _run("check", str(_config(tmp_path, "check:\n  bench: {concurency: [1]}\n")))
    assert r.returncode == 2 and "check.bench.concurency" in r.stderr


def test_report_rebuilds_from_the_run_directory(tmp_path: Path) -> None:
    r = _run("check", str(_config(tmp_path)), "--only", "plan", "--json")
    run_dir = Path(json.loads(r.stdout)["run_dir"])
    (run_dir / "report.html").unlink()
    r2 = _run("report", str(run_dir), "--json")
    assert r2.returncode == 1 and "incomplete" in r2.stderr  # exits as `check` does (tests/cli/test_exit_contract)
    assert (run_dir / "report.html").exists()
    assert json.loads(r2.stdout)["overall"] == "incomplete"


def test_parts_left_out_on_the_command_line_say_so(tmp_path: Path) -> None:
    r = _run("check", str(_config(tmp_path)), "--only", "plan", "--json")
    parts = {p["part"]: p for p in json.loads((Path(json.loads(r.stdout)["run_dir"]) / "parts.json").read_text())}
    assert parts["probe"]["reason"] == "left out by --only"  # was "disabled in switchover.yaml"
    assert parts["rollback"]["reason"] == "left out by --only"
    r = _run("check", str(_config(tmp_path)), "--skip", "bench", "--json")
    parts = {p["part"]: p for p in json.loads((Path(json.loads(r.stdout)["run_dir"]) / "parts.json").read_text())}
    assert parts["bench"]["reason"] == "skipped by --skip"


def test_only_help_names_every_part() -> None:
    from switchover.check.registry import NAMES

    r = _run("check", "--help")
    text = " ".join(r.stdout.split())
    assert all(p in text for p in NAMES), text


def test_report_on_a_folder_that_is_not_a_check_run_exits_2(tmp_path: Path) -> None:
    r = _run("report", str(tmp_path))
    assert r.returncode == 2 and "not a check run directory" in r.stderr
