"""A line of an engine's log as evidence: its number, the excerpt kept (secrets masked, long lines cut around the
match) and the pattern and source that read it; shared by `hw startlog`'s facts, fallbacks and out-of-memory
messages."""

from __future__ import annotations

import re
from functools import cache

from pydantic import BaseModel, Field

from switchover.redaction import redact

MAX_TEXT = 300  # characters of a log line kept as evidence
ANSI = re.compile(r"\x1b\[[0-9;]*[A-Za-z]")


@cache
def compiled(regex: str) -> re.Pattern[str]:
    """A data file's regex, compiled once."""
    return re.compile(regex)


class Evidence(BaseModel):
    line: int = Field(description="1-based line number in the log")
    text: str
    pattern: str
    source: str


def excerpt(line: str, m: re.Match[str]) -> str:
    """The line, or for a long one (vLLM logs its whole config on one line) its prefix and the part that matched;
    secrets masked (an engine may log its arguments, API key included) before the line is cut, so that a cut
    through a secret's name cannot leave its value showing."""
    masked = redact(line)
    if masked == line:
        return _cut(line, m)
    again = m.re.search(masked)
    return redact(_cut(masked, again) if again else masked[:MAX_TEXT].strip())


def _cut(line: str, m: re.Match[str]) -> str:
    line = line.rstrip()
    if len(line) <= MAX_TEXT:
        return line.strip()
    head = line[: line.find("] ") + 2] if line.startswith("(") and "] " in line[:120] else ""
    a, b = m.span("value") if "value" in m.re.groupindex and m.group("value") is not None else m.span()
    if b - a > MAX_TEXT:
        b = a + MAX_TEXT
    lo = max(len(head), a - 40)
    return f"{head}…{line[lo : b + 40]}…"
