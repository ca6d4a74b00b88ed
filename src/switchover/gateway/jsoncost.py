"""What parsing a JSON body will cost, known before a single object is built.

Parsed JSON costs far more than its bytes: each `{}` (2 bytes and a comma) becomes a 64-byte dict and a list slot,
so 57 MiB of `[{},{},...]` took the gateway to 1.9 GB. The parse is bounded by counting the body's JSON tokens
first (containers, separators and strings: each value of the parse is one of them or follows one) and refusing a
body with more than `limits.max_json_values` of them; the rest is priced (`parsed_cost`) and drawn from the memory
budget before `orjson.loads` runs. orjson also refuses nesting deeper than 1024 levels.

Counting is linear: a cheap upper bound first (`bytes.count` of `{ [ , :` and quotes, inside strings too), and only
when that is over the limit an exact count outside strings, which stops as soon as the limit is passed. Both walk
the body in windows and yield to the event loop between them, so a 64 MiB body never holds the loop for long.
(orjson holds the GIL while it parses, so a worker thread would not free the loop: the value limit is what bounds
a parse's time; measured: 1,000,000 `{}` parse in about 65 ms, 5,000,000 in 0.55 s with a 1 ms sleeper thread
blocked throughout.)
"""

from __future__ import annotations

import asyncio
import re
from dataclasses import dataclass

WINDOW = 64 << 10  # bytes counted between two yields to the event loop
VALUE_COST = 64  # bytes of Python objects per token, at most (a dict 64, an int 28-36, a str 49 + its chars)
_MARKS = (b"{", b"[", b",", b":")
# a string's characters up to its closing quote or a window's end (the unrolled-loop form: linear)
_STRING_REST = re.compile(rb'[^"\\]*(?:\\.[^"\\]*)*', re.DOTALL)


def marks(body: bytes, start: int, end: int) -> int:
    """The `{ [ , :` in body[start:end]."""
    return sum(body.count(m, start, end) for m in _MARKS)


def tokens_bound(body: bytes, start: int = 0, end: int | None = None) -> int:
    """An upper bound on the JSON tokens of body[start:end]: every `{ [ , :` (inside strings or not), and a
    string per two quotes (escaped ones included)."""
    end = len(body) if end is None else end
    return marks(body, start, end) + (body.count(b'"', start, end) + 1) // 2


@dataclass(slots=True)
class TokenScan:
    """The exact count of JSON tokens outside strings plus the strings themselves, fed window by window."""

    tokens: int = 0
    in_string: bool = False
    escaped: bool = False  # the window ended on a backslash inside a string

    def feed(self, body: bytes, start: int, end: int, limit: int) -> bool:
        """Count body[start:end]; False as soon as the count passes `limit` (the scan stops there)."""
        pos = start
        while pos < end:
            if self.in_string:
                if self.escaped:
                    self.escaped = False
                    pos += 1
                    continue
                m = _STRING_REST.match(body, pos, end)
                pos = m.end() if m is not None else pos
                if pos >= end:
                    break
                if body[pos] == 0x5C:  # a backslash as the window's last byte: its escaped byte is in the next one
                    self.escaped = True
                    pos += 1
                    continue
                self.in_string = False  # the closing quote
                pos += 1
                continue
            quote = body.find(b'"', pos, end)
            stop = end if quote < 0 else quote
            self.tokens += marks(body, pos, stop)
            if quote >= 0:
                self.tokens += 1
                self.in_string = True
                pos = quote + 1
            else:
                pos = end
            if self.tokens > limit:
                return False
        return True


def parsed_cost(body: bytes, tokens: int) -> int:
    """Bytes the parse of `body` can occupy: its characters (4 bytes each when any string may hold a character
    beyond Latin-1, as CPython then widens the whole string) and VALUE_COST per token."""
    wide = not body.isascii() or b"\\u" in body
    return (4 if wide else 1) * len(body) + VALUE_COST * (tokens + 1)


async def count_tokens(body: bytes, limit: int) -> int | None:
    """The JSON tokens of `body`, or None when they are more than `limit` (counted in windows, yielding between)."""
    bound = 0
    for start in range(0, len(body), WINDOW):
        bound += tokens_bound(body, start, start + WINDOW)
        if start:
            await asyncio.sleep(0)
    if bound <= limit:
        return bound
    scan = TokenScan()
    for start in range(0, len(body), WINDOW):
        if not scan.feed(body, start, min(len(body), start + WINDOW), limit):
            return None
        await asyncio.sleep(0)
    return scan.tokens
