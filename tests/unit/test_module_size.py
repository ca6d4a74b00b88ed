"""House rule (issue 16): no module of the package over 500 lines of code; split it by what it does instead.
Lines of code, since `ruff format` became the house style (issue 25): blank lines and lines holding only closing
brackets, which the formatter adds when it splits a call, are not counted."""

from __future__ import annotations

import re
from pathlib import Path

import switchover

LIMIT = 500
_ONLY_CLOSING = re.compile(r"^\s*[)\]}]+[,:]?\s*(#.*)?$")


def code_lines(text: str) -> int:
    """Lines that carry code or comments: not blank, not only closing brackets."""
    return sum(1 for line in text.splitlines() if line.strip() and not _ONLY_CLOSING.match(line))


def test_code_lines_skip_blank_and_closing_bracket_lines() -> None:
    assert code_lines("x = f(\n    1,\n)\n\n# why\ny = [\n    2\n]:\n") == 5


def test_no_module_over_the_limit() -> None:
    root = Path(switchover.__file__).parent
    long = {
        str(p.relative_to(root)): n
        for p in root.rglob("*.py")
        if (n := code_lines(p.read_text(encoding="utf-8"))) > LIMIT
    }
    assert not long, f"modules over {LIMIT} lines of code: {long}"
