"""Remote text is printed as plain characters: no escape sequence, control character or bidi override survives."""

from __future__ import annotations

import time

import pytest

from switchover.termtext import printable, printable_bytes


@pytest.mark.parametrize(
    ("raw", "shown"),
    [
        ("plain text", "plain text"),
        ("\x1b[31mred\x1b[0m", "red"),  # SGR colour
        ("a\x1b[2J\x1b[Hb", "ab"),  # clear screen, cursor home
        ("\x1b]0;new title\x07x", "x"),  # OSC window title, BEL-terminated
        ("\x1b]8;;http://evil/\x1b\\link\x1b]8;;\x1b\\", "link"),  # OSC 8 hyperlink, ST-terminated
        ("\x9b31mc1\x9b0m", "c1"),  # 8-bit CSI
        ("line\r\nnext\tx", "line  next x"),  # a line stays one line
        ("go\x08\x08no", "go  no"),  # backspaces cannot overwrite what was printed
        ("\u202eesab", " esab"),  # right-to-left override
        ("\x1b", ""),  # a lone ESC at the end
    ],
)
def test_escape_sequences_and_controls_are_removed(raw: str, shown: str) -> None:
    assert printable(raw) == shown


def test_long_text_is_cut_with_an_ellipsis() -> None:
    assert printable("x" * 600, 10) == "x" * 9 + "…"
    assert printable_bytes(b"\xff\x1b[1mok", 10) == "\ufffdok"


def test_adversarial_input_is_cleaned_in_linear_time() -> None:
    """1 MB of unterminated sequence starts: a backtracking pattern would take minutes."""
    for text in ("\x1b[" * 500_000, "\x1b]" + "a" * 1_000_000, "\x1b[0;" * 250_000):
        t0 = time.perf_counter()
        out = printable(text, 2_000_000)
        assert time.perf_counter() - t0 < 2.0
        assert "\x1b" not in out
