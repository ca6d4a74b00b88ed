"""Text and JSON files a user hands over, read with limits: a size cap, UTF-8 only, nesting that cannot exhaust
the stack, and every failure a BadInput naming the file (never a UnicodeDecodeError or RecursionError)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from switchover.errors import BadInput

MAX_BYTES = 1 << 20


def read_text(path: str | Path, *, max_bytes: int = MAX_BYTES, what: str = "file") -> str:
    """A user's text file, refused (BadInput) when missing, a directory, too large, or not UTF-8."""
    p = Path(path)
    try:
        with p.open("rb") as fh:
            raw = fh.read(max_bytes + 1)
    except FileNotFoundError:
        raise BadInput(f"{p}: no such file") from None
    except IsADirectoryError:
        raise BadInput(f"{p}: is a directory, expected a {what}") from None
    except OSError as exc:
        raise BadInput(f"{p}: cannot read: {exc.strerror or exc}") from None
    if len(raw) > max_bytes:
        raise BadInput(f"{p}: larger than {max_bytes // 1024} KiB, not a {what}")
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise BadInput(f"{p}: not UTF-8 text (byte {exc.start}), not a {what}") from None


def parse_json(text: str, source: str) -> Any:
    """JSON text as data; BadInput with the line and column when malformed or nested absurdly deep."""
    try:
        return json.loads(text)
    except json.JSONDecodeError as exc:
        raise BadInput(f"{source}: malformed JSON at line {exc.lineno} column {exc.colno}: {exc.msg}") from None
    except RecursionError:
        raise BadInput(f"{source}: JSON nested too deeply") from None


def load_json(path: str | Path, *, max_bytes: int = MAX_BYTES, what: str = "JSON file") -> Any:
    """Read and parse a user's JSON file."""
    return parse_json(read_text(path, max_bytes=max_bytes, what=what), str(path))
