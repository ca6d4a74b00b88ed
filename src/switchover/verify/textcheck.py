"""Pure checks on one generated text: repetition loops (n-grams), early stops, script/language drift."""

from __future__ import annotations

import re
import unicodedata
from collections import Counter

_WORD = re.compile(r"[\u3400-\u9fff\uf900-\ufaff]|[^\s\u3400-\u9fff\uf900-\ufaff]+")


def units(text: str) -> list[str]:
    """Words, with each CJK character as its own unit (CJK has no spaces)."""
    return _WORD.findall(text)


def repetition(text: str, n: int = 3) -> float:
    """Share of n-grams of units that repeat an earlier n-gram (0 = none, near 1 = a loop)."""
    u = units(text)
    grams = [tuple(u[i : i + n]) for i in range(len(u) - n + 1)]
    if len(grams) < 4:
        return 0.0
    counts = Counter(grams)
    return sum(c - 1 for c in counts.values()) / len(grams)


def tail_loop(text: str, min_period: int = 2, max_period: int = 60, repeats: int = 3) -> str | None:
    """The unit that the text ends repeating (at least `repeats` times back to back), if any."""
    t = text.rstrip()
    for period in range(min_period, min(max_period, len(t) // repeats) + 1):
        chunk = t[-period:]
        if chunk.strip() and t.endswith(chunk * repeats):
            return chunk
    return None


def is_loop(text: str) -> bool:
    return repetition(text) >= 0.5 or tail_loop(text) is not None


SCRIPTS = ("latin", "cjk", "cyrillic", "arabic", "greek", "hangul", "kana", "other")


def script_of(ch: str) -> str | None:
    """Writing system of a letter; None for digits, punctuation and spaces."""
    if not ch.isalpha():
        return None
    name = unicodedata.name(ch, "")
    for key, script in (
        ("CJK", "cjk"),
        ("LATIN", "latin"),
        ("CYRILLIC", "cyrillic"),
        ("ARABIC", "arabic"),
        ("GREEK", "greek"),
        ("HANGUL", "hangul"),
        ("HIRAGANA", "kana"),
        ("KATAKANA", "kana"),
    ):
        if key in name:
            return script
    return "other"


def script_mix(text: str) -> dict[str, float]:
    """Share of letters per writing system."""
    counts = Counter(s for s in map(script_of, text) if s is not None)
    total = sum(counts.values())
    return {k: round(v / total, 3) for k, v in counts.most_common()} if total else {}


def dominant(text: str) -> str | None:
    mix = script_mix(text)
    return next(iter(mix)) if mix else None


def script_drift(prompt: str, output: str, min_letters: int = 10) -> str | None:
    """'latin -> cjk' when the output's main script is not the prompt's (given enough letters)."""
    letters = sum(1 for ch in output if ch.isalpha())
    a, b = dominant(prompt), dominant(output)
    if letters < min_letters or a is None or b is None or a == b:
        return None
    return f"{a} -> {b}"


def early_stop(finish_reason: str | None, completion_tokens: int | None, min_tokens: int = 8) -> bool | None:
    """Stopped by itself (not by the length limit) after fewer than `min_tokens` tokens; None when the server
    reported no token count (not measured, not "early")."""
    if finish_reason in (None, "length"):
        return False
    if completion_tokens is None:
        return None
    return completion_tokens < min_tokens
