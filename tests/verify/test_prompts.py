"""The built-in prompt set is a packaged JSONL file in the format `verify --prompts FILE` reads."""

from __future__ import annotations

from importlib import resources

from switchover.verify.prompts import BUILTIN, load_jsonl


def test_builtin_set_is_the_packaged_file_and_reads_as_a_user_prompts_file() -> None:
    path = resources.files("switchover.verify").joinpath("data", "prompts.jsonl")
    with resources.as_file(path) as p:
        assert load_jsonl(p) == BUILTIN
    assert [c.id for c in BUILTIN][:2] == ["en-capital", "en-explain"] and len(BUILTIN) == 12
    assert {c.kind for c in BUILTIN} == {"english", "chinese", "code", "json"}
    assert len({c.id for c in BUILTIN}) == len(BUILTIN)
    assert all(c.max_tokens == 48 and c.as_messages()[0]["role"] == "user" for c in BUILTIN)
