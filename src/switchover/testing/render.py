"""OpenAI-shaped bytes shared by the fake engines: SSE events, usage events, whole answers, HTTP chunks."""

from __future__ import annotations

import time
from typing import Any

import orjson

DONE = b"data: [DONE]\n\n"


def sse(obj: object) -> bytes:
    """One SSE event carrying `obj` as JSON."""
    return b"data: " + orjson.dumps(obj) + b"\n\n"


def chunk(
    text: str,
    finish: str | None = None,
    chat: bool = True,
    index: int = 0,
    model: str = "m",
    id_: str = "cmpl-1",
    empty_delta: bool = False,
) -> bytes:
    """One streamed choice event (chat `delta` or completions `text`). With empty_delta, an empty text gives
    `delta: {}` (what engines send with the finish_reason)."""
    choice: dict[str, Any] = {"index": index, "finish_reason": finish}
    if chat:
        choice["delta"] = {"content": text} if text or not empty_delta else {}
    else:
        choice["text"] = text
    obj = {
        "id": id_,
        "object": "chat.completion.chunk" if chat else "text_completion",
        "created": int(time.time()),
        "model": model,
        "choices": [choice],
    }
    return sse(obj)


def usage(prompt: int, completion: int, cached: int | None = None) -> dict[str, Any]:
    u: dict[str, Any] = {"prompt_tokens": prompt, "completion_tokens": completion, "total_tokens": prompt + completion}
    if cached is not None:
        u["prompt_tokens_details"] = {"cached_tokens": cached}
    return u


def usage_chunk(
    prompt: int, completion: int, cached: int | None = None, model: str = "m", id_: str = "cmpl-1"
) -> bytes:
    """The final `choices: []` event that carries usage (stream_options.include_usage)."""
    return sse(
        {
            "id": id_,
            "object": "chat.completion.chunk",
            "model": model,
            "choices": [],
            "usage": usage(prompt, completion, cached),
        }
    )


def whole(
    chat: bool,
    text: str,
    finish: str = "length",
    model: str = "m",
    prompt_tokens: int = 3,
    completion_tokens: int = 1,
    id_: str = "cmpl-1",
) -> dict[str, Any]:
    """A non-streamed answer with one choice."""
    choice: dict[str, Any] = {"index": 0, "finish_reason": finish}
    if chat:
        choice["message"] = {"role": "assistant", "content": text}
    else:
        choice["text"] = text
    return {
        "id": id_,
        "object": "chat.completion" if chat else "text_completion",
        "created": int(time.time()),
        "model": model,
        "choices": [choice],
        "usage": usage(prompt_tokens, completion_tokens),
    }


def error_body(status: int, message: str, type_: str = "server_error") -> dict[str, Any]:
    """An OpenAI-style error body."""
    return {"error": {"message": message, "type": type_, "code": status}}


def http_chunk(data: bytes) -> bytes:
    """One HTTP/1.1 chunked-encoding chunk."""
    return b"%x\r\n%s\r\n" % (len(data), data)
