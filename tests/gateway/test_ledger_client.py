"""The `client` field of a request row: which sampling fields the client set, never the prompt text."""

from __future__ import annotations

from typing import Any

import pytest

from switchover.gateway.ledger import SUFFIX_CHARS, client_sampling
from switchover.ledger_record import ClientSampling
from tests.gateway.conftest import chat, stack

KEY = b"deployment-seed"


@pytest.mark.parametrize(
    ("body", "want"),
    [
        ({"messages": []}, {"set": [], "seed": False, "stop": None, "temperature": None, "max_tokens": None}),
        (
            {"temperature": 0.2, "top_p": 0.9, "top_k": 20, "max_tokens": 64},
            {
                "set": ["max_tokens", "temperature", "top_k", "top_p"],
                "temperature": 0.2,
                "top_p": 0.9,
                "top_k": 20,
                "max_tokens": 64,
            },
        ),
        ({"max_completion_tokens": 9, "max_tokens": 3}, {"max_tokens": 9}),  # the newer name wins, as OpenAI's
        (
            {"temperature": True, "top_k": 2.5, "max_tokens": "10"},
            {"temperature": None, "top_k": None, "max_tokens": None},
        ),  # wrong types: not values
        ({"seed": 1234}, {"seed": True, "set": ["seed"]}),  # present, the value is not kept
        ({"stop": "###"}, {"stop": 1}),
        ({"stop": ["a", "b", "c"]}, {"stop": 3}),
        ({"stop": None}, {"stop": None}),
        ({"response_format": {"type": "json_schema", "json_schema": {}}}, {"response_format": "json_schema"}),
        ({"presence_penalty": 0.5, "frequency_penalty": -1}, {"presence_penalty": 0.5, "frequency_penalty": -1.0}),
    ],
)
def test_the_sampling_fields_the_client_set_are_recorded(body: dict[str, Any], want: dict[str, Any]) -> None:
    got = client_sampling(body, KEY)
    assert {k: got[k] for k in want} == want
    ClientSampling.model_validate(got)  # a valid ledger field


def _msgs(system: str | None, user: Any) -> dict[str, Any]:
    m = [{"role": "system", "content": system}] if system is not None else []
    return {
        "messages": [
            *m,
            {"role": "user", "content": "first"},
            {"role": "assistant", "content": "x"},
            {"role": "user", "content": user},
        ]
    }


def test_a_fixed_ending_is_a_keyed_hash_equal_across_requests_and_never_the_text() -> None:
    ending = " Answer in plain text, no markdown, in at most three short sentences please."  # > 64 characters
    a = client_sampling(_msgs("You are terse.", "What is 2+2?" + ending), KEY)
    b = client_sampling(_msgs("You are terse.", "x" * 5000 + "Name a colour." + ending), KEY)
    c = client_sampling(_msgs(None, "Name a colour."), KEY)
    assert len(ending) > SUFFIX_CHARS and a["user_suffix"] == b["user_suffix"] and len(a["user_suffix"]) == 16
    assert a["system_suffix"] == b["system_suffix"] and c["system_suffix"] is None
    assert a["user_suffix"] != c["user_suffix"]
    assert client_sampling(_msgs("You are terse.", "q"), b"other-seed")["system_suffix"] != a["system_suffix"]
    assert "markdown" not in str(a) and "terse" not in str(a)


def test_text_parts_and_a_completions_prompt_end_the_same_way_as_a_string() -> None:
    text = "Summarise this. Reply in JSON."
    parts = [
        {"type": "text", "text": "Summarise this."},
        {"type": "image_url", "image_url": {"url": "x"}},
        {"type": "text", "text": " Reply in JSON."},
    ]
    assert (
        client_sampling(_msgs(None, parts), KEY)["user_suffix"]
        == client_sampling(_msgs(None, text), KEY)["user_suffix"]
        == client_sampling({"prompt": text}, KEY)["user_suffix"]
    )


async def test_a_request_through_the_gateway_has_its_client_fields_in_its_ledger_row(tmp_path) -> None:
    async with stack(tmp_path, weight=0) as s:
        status, _, _ = await s.post(chat(temperature=0.3, stop=["\n\n", "END"], seed=7))
        assert status == 200
        status, _, _ = await s.post({"model": "m"}, path="/v1/models")
        (row,) = [r for r in s.rows() if r.path == "/v1/chat/completions"]
    assert row.client is not None
    assert (row.client.temperature, row.client.stop, row.client.seed, row.client.max_tokens) == (0.3, 2, True, 4)
    assert row.client.set == ["max_tokens", "seed", "stop", "temperature"] and row.client.user_suffix
