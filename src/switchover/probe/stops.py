"""Pure helpers that pick stop strings from a greedy reference output and read what a stop did."""

from __future__ import annotations

import itertools
from typing import Literal

StopOutcome = Literal["trimmed", "kept", "not hit"]

# strings a byte-level model will essentially never produce: the "other" stop strings of a list
FILLERS = tuple(f"\u00a7\u00a7zq{i}x\u00a7" for i in range(8))


def _usable(s: str) -> bool:
    return bool(s.strip()) and "\ufffd" not in s and s == s.strip("\n")


def pick_stop(text: str, length: int = 4) -> tuple[str, int] | None:
    """A substring of `text` whose first occurrence starts about a third of the way in (not at 0)."""
    if len(text) < length + 4:
        return None
    start = max(2, len(text) // 3)
    for pos in list(range(start, len(text) - length)) + list(range(2, start)):
        s = text[pos : pos + length]
        if _usable(s) and text.find(s) == pos:
            return s, pos
    return None


def token_stop(chunks: list[str], text: str) -> tuple[str, int] | None:
    """A whole streamed token (>= 3 chars) whose first occurrence is where it was generated, about a third in;
    aligned with token boundaries, so both text-matching and token-matching engines can honour it."""
    starts, pos = [], 0
    for c in chunks:
        starts.append(pos)
        pos += len(c)
    order = list(range(len(chunks) // 3, len(chunks))) + list(range(1, len(chunks) // 3))
    for i in order:
        c = chunks[i]
        if len(c.strip()) >= 3 and _usable(c) and text.find(c) == starts[i]:
            return c, starts[i]
    return pick_stop(text)


def straddling_stop(chunks: list[str], text: str) -> tuple[str, int] | None:
    """A stop string made of the end of one streamed token and the start of the next (first occurrence)."""
    pos = 0
    for a, b in itertools.pairwise(chunks):
        pos += len(a)
        if len(a.strip()) >= 2 and len(b.strip()) >= 2:
            s = a[-2:] + b[:2]
            if _usable(s) and text.find(s) == pos - 2:
                return s, pos - 2
    return None


def inside_token_stop(chunks: list[str], text: str) -> tuple[str, int] | None:
    """A stop string strictly inside one streamed token of at least 4 characters (first occurrence)."""
    pos = 0
    for c in chunks:
        if len(c) >= 4:
            s = c[1:-1]
            if _usable(s) and text.find(s) == pos + 1:
                return s, pos + 1
        pos += len(c)
    return None


def outcome(out: str, reference: str, stop: str, pos: int) -> StopOutcome:
    """How a request with `stop` ended, given the unstopped reference and the stop's position in it."""
    if out == reference[:pos]:
        return "trimmed"
    if out == reference[: pos + len(stop)]:
        return "kept"
    if len(out) <= pos + len(stop) and reference.startswith(out) and out:
        return "trimmed" if len(out) <= pos else "kept"
    return "not hit"


def stop_lists(stop: str, n: int = 6) -> list[list[str]]:
    """n lists of n stop strings each, where list k carries the real stop at position k and fillers elsewhere."""
    return [[stop if i == k else FILLERS[i] for i in range(n)] for k in range(n)]
