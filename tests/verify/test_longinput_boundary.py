"""The long-input bisection orders by its own target length and records the server's counts as measured: a
server without /tokenize gives unknown text counts (None), never 0, and the boundary is still found."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

import pytest

from switchover.verify import longinput


class Server:
    """Accepts texts up to `limit` characters; /tokenize optional (about 4 characters per token)."""

    base_url = "http://127.0.0.1:1"

    def __init__(self, limit: int, tokenize: bool) -> None:
        self.limit, self.can_tokenize = limit, tokenize

    async def tokenize(self, text: str, model: str, add_special: bool = True) -> list[int] | None:
        return list(range(len(text) // 4)) if self.can_tokenize else None


@pytest.mark.parametrize("tokenize", [True, False])
async def test_boundary_is_found_with_and_without_tokenize(monkeypatch: pytest.MonkeyPatch, tokenize: bool) -> None:
    server = Server(limit=4 * 900, tokenize=tokenize)

    async def send(client: Any, body: dict[str, Any]) -> Any:
        n = len(body["messages"][0]["content"])
        if n > server.limit:
            return SimpleNamespace(failure=SimpleNamespace(message="prompt too long"), text="", usage=None)
        return SimpleNamespace(
            failure=None, text="ok", usage=SimpleNamespace(prompt_tokens=n // 4 + 7, completion_tokens=1)
        )

    monkeypatch.setattr(longinput, "send", send)
    b = await longinput.find_boundary(server, "m", context=1024)  # type: ignore[arg-type]
    assert b.longest_ok_target_tokens is not None and b.shortest_failed_target_tokens is not None
    assert b.longest_ok_target_tokens < b.shortest_failed_target_tokens
    # the text runs a little over its target (whole sentences, the instruction): the edge lies just under 900
    assert 850 < b.longest_ok_target_tokens < b.shortest_failed_target_tokens <= 900
    assert b.failure == "prompt too long"
    if tokenize:
        assert b.longest_ok_text_tokens and 850 < b.longest_ok_text_tokens <= 900
        assert b.shortest_failed_text_tokens and b.shortest_failed_text_tokens > b.longest_ok_text_tokens
    else:
        assert b.longest_ok_text_tokens is None and b.shortest_failed_text_tokens is None
    assert b.longest_ok_prompt_tokens and b.longest_ok_prompt_tokens > 800
