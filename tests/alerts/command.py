"""`switchover alerts ...` run in process as a user types it, for the alert tests: exit code, stdout, stderr."""

from __future__ import annotations

import sys
from unittest.mock import patch

import pytest

from switchover.cli.app import main


def run_alerts(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    """Exit code, stdout and stderr of `switchover alerts ARGS` (what earlier in the test printed is dropped)."""
    capsys.readouterr()
    with patch.object(sys, "argv", ["switchover", "alerts", *args]), pytest.raises(SystemExit) as exc:
        main()
    out = capsys.readouterr()
    return int(exc.value.code or 0), out.out, out.err
