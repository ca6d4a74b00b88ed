"""Error bodies in the three shapes engines use, parsed into one model.

- nested: {"error": {"message", "type", "code", "param"}}  (OpenAI, vLLM >= 0.6, llama.cpp, TRT-LLM)
- flat:   {"object": "error", "message", "type", "code"}   (older vLLM, SGLang)
- tgi:    {"error": "message", "error_type": "validation"}  (TGI router)
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal

import orjson

ErrorShape = Literal["nested", "flat", "tgi", "text", "empty"]
_MAX_TEXT = 2000


@dataclass(slots=True)
class ErrorBody:
    """What an engine said went wrong."""

    shape: ErrorShape
    message: str
    type: str | None = None
    code: str | None = None
    param: str | None = None


def _s(value: Any) -> str | None:
    return None if value is None else str(value)


def _openai_shaped(shape: ErrorShape, fields: dict[str, Any]) -> ErrorBody:
    """OpenAI's error fields (message, type, code, param), from the `error` object or the body itself."""
    return ErrorBody(
        shape=shape,
        message=str(fields.get("message", "")),
        type=_s(fields.get("type")),
        code=_s(fields.get("code")),
        param=_s(fields.get("param")),
    )


def parse_error_obj(obj: Any) -> ErrorBody | None:
    """Recognise an already-decoded JSON error object; None when it is not one."""
    if not isinstance(obj, dict):
        return None
    err = obj.get("error")
    if isinstance(err, dict):
        return _openai_shaped("nested", err)
    if obj.get("object") == "error":
        return _openai_shaped("flat", obj)
    if isinstance(err, str):
        return ErrorBody(shape="tgi", message=err, type=_s(obj.get("error_type")))
    return None


def parse_error_body(raw: bytes) -> ErrorBody:
    """Parse any error response body; unknown shapes keep their (truncated) text."""
    if not raw.strip():
        return ErrorBody(shape="empty", message="")
    try:
        parsed = parse_error_obj(orjson.loads(raw))
    except orjson.JSONDecodeError:
        parsed = None
    if parsed is not None:
        return parsed
    return ErrorBody(shape="text", message=raw[:_MAX_TEXT].decode("utf-8", "replace"))
