"""Prompt text of a request and its estimated token count (for pinning long requests to old)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from switchover.errors import BadInput


def prompt_text(obj: dict[str, Any]) -> tuple[str, int]:
    """The text of `prompt` / `messages` and any number of pre-tokenized ids found (completions accept ids)."""
    parts: list[str] = []
    ids = 0
    prompt = obj.get("prompt")
    if isinstance(prompt, str):
        parts.append(prompt)
    elif isinstance(prompt, list):
        for p in prompt:
            if isinstance(p, str):
                parts.append(p)
            elif isinstance(p, int):
                ids += 1
            elif isinstance(p, list):
                ids += sum(1 for x in p if isinstance(x, int))
    messages = obj.get("messages")
    if isinstance(messages, list):
        for m in messages:
            content = m.get("content") if isinstance(m, dict) else None
            if isinstance(content, str):
                parts.append(content)
            elif isinstance(content, list):
                parts.extend(c["text"] for c in content if isinstance(c, dict) and isinstance(c.get("text"), str))
    return "\n".join(parts), ids


class PromptEstimator:
    """Counts prompt tokens with a tokenizer.json when configured, else bytes / bytes_per_token."""

    def __init__(self, tokenizer_path: str | None, bytes_per_token: float) -> None:
        self.bytes_per_token = bytes_per_token
        self.name = f"bytes/{bytes_per_token:g}"
        self._encode: Callable[[str], int] | None = None
        if tokenizer_path:
            from switchover.model.tokenizer import encoder_from_file

            try:
                tok = encoder_from_file(tokenizer_path, "gateway.tokenizer (tokenizer.json)")
            except ImportError:
                raise BadInput(
                    "gateway.tokenizer needs the `tokenizers` package (pip install 'switchover[model]')"
                ) from None
            except BadInput as exc:
                raise BadInput(f"gateway.tokenizer: {exc.message}") from None
            self._encode = lambda text: len(tok.encode(text, add_special_tokens=False).ids)
            self.name = f"tokenizer:{tokenizer_path}"

    def estimate(self, obj: dict[str, Any]) -> int:
        text, ids = prompt_text(obj)
        if self._encode is not None:
            return ids + self._encode(text)
        return ids + int(len(text.encode("utf-8", "replace")) / self.bytes_per_token + 0.999)
