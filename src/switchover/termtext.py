"""Remote text made safe to print: what a server sent (an error message, a reason, a redirect target) reaches a
terminal only as plain characters, never as escape sequences that move the cursor, retitle the window, hide
text or forge a verdict line."""

from __future__ import annotations

import re

# ECMA-48 sequences: CSI (ESC [ ... final), OSC/DCS/PM/APC/SOS strings (ESC ] ... BEL or ST), any other ESC X;
# the 8-bit C1 forms too. Each alternative is a single pass over a character class, so the scan is linear.
_SEQUENCE = re.compile(
    r"(?:\x1b\[|\x9b)[0-?]*[ -/]*[@-~]?"
    r"|(?:\x1b[\]PX^_]|[\x90\x98\x9d\x9e\x9f])[^\x07\x1b\x9c]*(?:\x07|\x1b\\|\x9c)?"
    r"|\x1b[ -~]?"
)
# what is left that a terminal acts on: C0 and C1 controls, DEL, and the bidirectional overrides and isolates
# (they reorder what is shown: "rollback" can be made to read as something else)
_CONTROL = re.compile(r"[\x00-\x1f\x7f-\x9f\u061c\u200e\u200f\u202a-\u202e\u2066-\u2069]")


def printable(text: str, limit: int = 500) -> str:
    """`text` with escape sequences removed and other control characters as spaces (a line stays one line),
    cut to `limit` characters with an ellipsis."""
    clean = _CONTROL.sub(" ", _SEQUENCE.sub("", text))
    return clean if len(clean) <= limit else clean[: max(limit - 1, 0)] + "…"


def printable_bytes(data: bytes, limit: int = 500) -> str:
    """`printable` of bytes decoded as UTF-8 (undecodable bytes replaced)."""
    return printable(data[: limit * 4].decode("utf-8", "replace"), limit)
