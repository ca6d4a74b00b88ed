"""House rule (issue 16): no module of the package over 500 lines; split it by what it does instead."""

from __future__ import annotations

from pathlib import Path

import switchover

LIMIT = 500


def test_no_module_over_the_limit() -> None:
    root = Path(switchover.__file__).parent
    long = {str(p.relative_to(root)): n for p in root.rglob("*.py")
            if (n := len(p.read_text(encoding="utf-8").splitlines())) > LIMIT}
    assert not long, f"modules over {LIMIT} lines: {long}"
