"""The profile's `request_cap:` entries: where a running server reports its request-count cap, for a release range,
cited at a release."""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from switchover.engines.profile import RequestCapSource, list_profiles, load_profile


def test_llamacpp_reports_its_request_cap_as_props_total_slots_from_b3135() -> None:
    (src,) = load_profile("llamacpp").request_cap
    assert (src.path, src.field, src.versions) == ("/props", "total_slots", ">=b3135")
    assert src.source == "https://github.com/ggml-org/llama.cpp/blob/b11434/tools/server/server-context.cpp"
    assert src.holds_at("b3135") and src.holds_at("b11434") and not src.holds_at("b3134")


@pytest.mark.parametrize("name", list_profiles())
def test_every_request_cap_entry_cites_a_url_at_a_release(name: str) -> None:
    for src in load_profile(name).request_cap:
        assert src.source.startswith("https://") and "/blob/" in src.source


@pytest.mark.parametrize(
    "bad",
    [
        {"path": "props", "field": "total_slots", "source": "https://x"},  # not a path
        {"path": "/props", "field": "total slots", "source": "https://x"},  # not a dotted key
        {"path": "/props", "field": "total_slots", "versions": ">>b1", "source": "https://x"},  # not a range
        {"path": "/props", "field": "total_slots", "source": " "},  # uncited
    ],
)
def test_a_malformed_request_cap_entry_is_refused_when_the_profile_loads(bad: dict) -> None:
    with pytest.raises(ValidationError):
        RequestCapSource.model_validate({"verified": True, **bad})
