"""llama.cpp's build string (/props build_info, `--version`) read as its release tag."""

from __future__ import annotations

import pytest

from switchover.engines.versions import build_tag


@pytest.mark.parametrize(
    ("text", "tag"),
    [
        ("b11434-0a1b2c3", "b11434"),
        ("b3135", "b3135"),
        ("b011434-0a1b2c3", "b11434"),  # the tag as the releases are named
        ("b0-unknown", None),  # built without its git history: the release is not known
        ("unknown", None),
        ("11434", None),  # not the build_info form
        ("b1234567890", None),  # longer than any build number read as one
        ("", None),
    ],
)
def test_a_build_string_gives_its_release_tag_or_none_when_the_build_is_not_known(text: str, tag: str | None) -> None:
    assert build_tag(text) == tag
