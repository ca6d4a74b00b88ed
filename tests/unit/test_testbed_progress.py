"""A long set-up step is never silent: the installer reports its elapsed time and last log line while it runs."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from switchover.testbed import install
from switchover.testbed.install import Installer, Step
from switchover.testbed.layout import Layout


def test_a_running_step_reports_progress_with_its_last_log_line(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(install, "PROGRESS_S", 0.2)
    events: list[tuple[str, str, str]] = []
    inst = Installer(Layout(tmp_path), with_smollm2=False, on_event=lambda k, s, d: events.append((k, s.key, d)))
    script = "import time\nprint('compiling ggml.c', flush=True)\ntime.sleep(1.0)\n"
    step = Step("slow", "a slow step", lambda: False, lambda: inst._sh([sys.executable, "-c", script], log="slow"))
    inst._step = step
    step.run()
    progress = [d for k, key, d in events if k == "progress" and key == "slow"]
    assert progress, events
    assert "so far; last log line: compiling ggml.c" in progress[-1]


def test_the_last_log_line_is_read_from_the_tail_and_shortened(tmp_path: Path) -> None:
    log = tmp_path / "x.log"
    log.write_text("a\n" * 10_000 + "\x1b[31m" + "y" * 300 + "\n\n")
    line = install._last_line(log, width=20)
    assert len(line) == 20 and line.endswith("…") and "\x1b" not in line and "[31m" not in line
    assert install._last_line(tmp_path / "missing.log") == "(log unreadable)"
