"""Reading JSON Lines input files (prompt sets, corpora): one value per non-blank line, a bad line named."""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from typing import Any

import orjson

from switchover.errors import BadInput


def jsonl_values(lines: Iterable[str], what: str) -> Iterator[tuple[int, Any]]:
    """(line number, decoded value) for each non-blank line; BadInput naming `what` and the line number when a
    line is not JSON."""
    for no, line in enumerate(lines, 1):
        if not line.strip():
            continue
        try:
            value = orjson.loads(line)
        except orjson.JSONDecodeError as exc:
            raise BadInput(f"{what} line {no}: not JSON ({exc})") from None
        yield no, value
