"""Structured output: validity of JSON-schema constrained answers (OpenAI response_format shape)."""

from __future__ import annotations

from typing import Any

import jsonschema
import orjson

from switchover.verify.greedy import send
from switchover.verify.report import StructuredCase, StructuredSide
from switchover.wire import EngineClient

SCHEMAS: list[tuple[str, str, dict[str, Any]]] = [
    (
        "bool",
        "Is water wet? Answer in JSON.",
        {
            "type": "object",
            "properties": {"answer": {"type": "boolean"}},
            "required": ["answer"],
            "additionalProperties": False,
        },
    ),
    (
        "enum",
        "Classify the sentiment of 'I love this phone' as JSON.",
        {
            "type": "object",
            "properties": {"sentiment": {"enum": ["positive", "negative", "neutral"]}},
            "required": ["sentiment"],
            "additionalProperties": False,
        },
    ),
    (
        "person",
        "Give the name and age of a fictional person as JSON.",
        {
            "type": "object",
            "properties": {
                "name": {"type": "string", "maxLength": 20},
                "age": {"type": "integer", "minimum": 0, "maximum": 120},
            },
            "required": ["name", "age"],
            "additionalProperties": False,
        },
    ),
    (
        "list",
        "List up to three colours as JSON.",
        {
            "type": "object",
            "properties": {"colours": {"type": "array", "items": {"enum": ["red", "green", "blue"]}, "maxItems": 3}},
            "required": ["colours"],
            "additionalProperties": False,
        },
    ),
    (
        "nested",
        "Describe a city with its country as JSON.",
        {
            "type": "object",
            "properties": {
                "city": {"type": "string", "maxLength": 20},
                "country": {
                    "type": "object",
                    "properties": {"code": {"type": "string", "enum": ["FR", "DE", "CN", "US"]}},
                    "required": ["code"],
                    "additionalProperties": False,
                },
            },
            "required": ["city", "country"],
            "additionalProperties": False,
        },
    ),
]


def check(text: str, schema: dict[str, Any]) -> tuple[str, str | None]:
    """('valid', None) or ('invalid', why)."""
    try:
        obj = orjson.loads(text)
    except orjson.JSONDecodeError as exc:
        return "invalid", f"not JSON: {exc}"[:160]
    try:
        jsonschema.validate(obj, schema)
    except jsonschema.ValidationError as exc:
        return "invalid", f"schema: {exc.message}"[:160]
    return "valid", None


async def structured_side(client: EngineClient, model: str, n: int, max_tokens: int = 128) -> StructuredSide:
    cases: list[StructuredCase] = []
    for i in range(n):
        name, prompt, schema = SCHEMAS[i % len(SCHEMAS)]
        cid = f"{name}-{i // len(SCHEMAS)}" if n > len(SCHEMAS) else name
        fmt = {"type": "json_schema", "json_schema": {"name": name, "schema": schema, "strict": True}}
        rec = await send(
            client,
            {
                "model": model,
                "messages": [{"role": "user", "content": prompt}],
                "temperature": 0,
                "max_tokens": max_tokens,
                "response_format": fmt,
            },
        )
        if rec.failure is not None:
            status = "rejected" if rec.failure.status else "error"
            cases.append(StructuredCase(id=cid, status=status, reason=rec.failure.message[:200]))
            continue
        status, why = check(rec.text, schema)
        if why and rec.finish_reason == "length":
            why += " (hit max_tokens)"
        cases.append(StructuredCase(id=cid, status=status, reason=why, text=rec.text[:200]))
    return StructuredSide(
        url=client.base_url, cases=cases, valid=sum(c.status == "valid" for c in cases), total=len(cases)
    )
