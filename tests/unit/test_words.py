"""Plain words for values shown in tables: no Python repr reaches a user."""

from __future__ import annotations

from typing import Any

import pytest

from switchover.words import plain


@pytest.mark.parametrize(
    ("value", "unit", "words"),
    [
        (None, None, "not known"),
        (True, None, "yes"),
        (False, None, "no"),
        (0.6, None, "0.6"),
        (80, "GiB", "80 GiB"),
        (131072, "tokens", "131,072 tokens"),
        ({"full": 80}, None, "full 80"),
        ({"temperature": 1.0, "top_p": 0.95, "top_k": None}, None, "temperature 1, top_p 0.95, top_k not known"),
        ({}, None, "none"),
        (["stop", "length"], None, "stop, length"),
        ([], None, "none"),
        ("reject_404", None, "reject_404"),
    ],
)
def test_values_read_as_words_with_units(value: Any, unit: str | None, words: str) -> None:
    assert plain(value, unit) == words


def test_what_missing_and_empty_say_can_be_chosen() -> None:
    assert plain(None, missing="(none)") == "(none)"
    assert plain({}, empty="no sampling fields") == "no sampling fields"
