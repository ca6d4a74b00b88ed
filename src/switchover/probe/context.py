"""What a probe talks through: one endpoint, its model, a few cached reference generations."""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field
from typing import Any

from switchover.wire import EngineClient, FailureKind, RequestRecord
from switchover.wire.records import Api

BASE_PROMPT = "Write a short story about a lighthouse keeper who finds a message in a bottle."
_DOWN_KINDS = {FailureKind.CONNECT, FailureKind.CONNECT_TIMEOUT, FailureKind.DISCONNECTED}


class EndpointDown(Exception):
    """The endpoint stopped answering in the middle of the probes."""


@dataclass
class ProbeContext:
    """One endpoint under probe. `send` builds an OpenAI body around the probe's fields."""

    client: EngineClient
    model: str
    api: Api = "chat"
    context: int | None = None
    prompt: str = BASE_PROMPT
    eos_candidates: tuple[str, ...] = ("<|im_end|>", "<|endoftext|>", "</s>", "<|eot_id|>", "<end_of_turn>")
    time_budget_s: float = 60.0  # for the few probes that generate until the server stops them
    _cache: dict[str, Any] = field(default_factory=dict)

    def body(self, prompt: str | None = None, **params: Any) -> dict[str, Any]:
        text = self.prompt if prompt is None else prompt
        base: dict[str, Any] = {"model": self.model}
        if self.api == "chat":
            base["messages"] = [{"role": "user", "content": text}]
        else:
            base["prompt"] = text
        base.update(params)
        return base

    async def send(
        self, prompt: str | None = None, *, include_usage: bool = True, raw: bool = False, **params: Any
    ) -> RequestRecord:
        """One request; raises EndpointDown when the server cannot be reached any more."""
        body = params if raw else self.body(prompt, **params)
        rec = await self.client.generate(self.api, body, include_usage=include_usage)
        if rec.failure is not None and rec.failure.kind in _DOWN_KINDS:
            # a pooled keep-alive connection the server already closed fails like this once: retry once
            await asyncio.sleep(0.2)
            rec = await self.client.generate(self.api, body, include_usage=include_usage)
            if rec.failure is not None and rec.failure.kind in _DOWN_KINDS:
                raise EndpointDown(rec.failure.message)
        return rec

    async def greedy(self, max_tokens: int = 48) -> RequestRecord:
        """The streamed greedy reference output (cached): stop strings are chosen from it."""
        key = f"greedy:{max_tokens}"
        if key not in self._cache:
            rec = await self.send(temperature=0, max_tokens=max_tokens, stream=True)
            self._cache[key] = rec
        return self._cache[key]

    async def end_tokens(self) -> list[tuple[int, str]]:
        """(id, text) of every end-of-text candidate that the server tokenizes to exactly one token."""
        if "eos" not in self._cache:
            found: list[tuple[int, str]] = []
            for cand in self.eos_candidates:
                ids = await self.client.tokenize(cand, self.model, add_special=False)
                if ids is not None and len(ids) == 1:
                    found.append((ids[0], cand))
            self._cache["eos"] = found
        return self._cache["eos"]

    async def eos_token_id(self) -> tuple[int | None, str | None]:
        """The first end-of-text candidate that is a single token (None when the server cannot tokenize)."""
        ends = await self.end_tokens()
        return ends[0] if ends else (None, None)
