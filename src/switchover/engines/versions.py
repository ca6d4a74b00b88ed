"""Engine version numbers and the range specs profiles key their data by ('>=0.8,<0.21'): one grammar for all."""

from __future__ import annotations

import re

# a dotted number of at most 8 parts of at most 9 digits, not cut out of a longer run of digits (int() refuses
# strings past 4,300 digits: a 5,000-digit "version" is no version)
_NUMBER = re.compile(r"(?<!\d)(\d{1,9}(?:\.\d{1,9}){0,7})(?!\d)")


def parse_version(text: str | None) -> tuple[int, ...] | None:
    """The leading dotted number of a version string ('0.11.2rc1' -> (0, 11, 2)); None when there is none."""
    if not text:
        return None
    m = _NUMBER.search(text[:200])
    return tuple(int(x) for x in m.group(1).split(".")) if m else None


def _cmp(a: tuple[int, ...], b: tuple[int, ...]) -> int:
    n = max(len(a), len(b))
    pa, pb = a + (0,) * (n - len(a)), b + (0,) * (n - len(b))
    return (pa > pb) - (pa < pb)


def version_matches(spec: str, version: tuple[int, ...]) -> bool:
    """Whether a version satisfies every clause of a spec such as '>=0.8,<0.21'."""
    for clause in filter(None, (c.strip() for c in spec.split(","))):
        m = re.match(r"(>=|<=|==|>|<)\s*(.+)", clause)
        bound = parse_version(m.group(2)) if m else None
        if not m or bound is None:
            raise ValueError(f"bad version clause {clause!r}")
        c = _cmp(version, bound)
        ok = {">=": c >= 0, "<=": c <= 0, "==": c == 0, ">": c > 0, "<": c < 0}[m.group(1)]
        if not ok:
            return False
    return True
