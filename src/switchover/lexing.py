"""The one regex-driven tokenizer behind switchover's two small expression languages: PromQL (alerts/promql.py,
to rewrite metric names) and the ledger-field expressions of custom gates (expr.py). Each language brings its own
token pattern (one named group per token kind); scanning, skipping and the error for a character the language
does not have are the same."""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass

_SKIP = frozenset({"ws", "comment"})


@dataclass(frozen=True)
class Token:
    kind: str  # a group name of the language's pattern (after `rename`), or "end"
    text: str
    start: int  # character offset into the source

    @property
    def end(self) -> int:
        return self.start + len(self.text)


def tokenize(
    pattern: re.Pattern[str],
    src: str,
    error: type[ValueError],
    *,
    skip: frozenset[str] = _SKIP,
    rename: Mapping[str, str] | None = None,
) -> list[Token]:
    """`src` as tokens of `pattern` (kinds in `skip` dropped); `error` naming the first character no token
    starts with (1-based position)."""
    out: list[Token] = []
    i = 0
    while i < len(src):
        m = pattern.match(src, i)
        if m is None or m.end() == i:
            raise error(f"unexpected character {src[i]!r} at {i + 1}")
        kind = m.lastgroup or "op"
        if kind not in skip:
            out.append(Token(rename.get(kind, kind) if rename else kind, m.group(), i))
        i = m.end()
    return out
