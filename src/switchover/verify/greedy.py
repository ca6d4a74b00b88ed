"""Collect greedy outputs (text, tokens, logprobs) from one endpoint."""

from __future__ import annotations

import asyncio
from typing import Any

from switchover.verify.divergence import Output
from switchover.verify.prompts import PromptCase
from switchover.wire import EngineClient, FailureKind, RequestRecord

_DOWN = {FailureKind.CONNECT, FailureKind.CONNECT_TIMEOUT, FailureKind.DISCONNECTED}


class EndpointDown(Exception):
    """The endpoint stopped answering."""


async def send(client: EngineClient, body: dict[str, Any], api: str = "chat") -> RequestRecord:
    """One request, retried once on a dropped connection; EndpointDown when it stays down."""
    rec = await client.generate(api, body)  # type: ignore[arg-type]
    if rec.failure is not None and rec.failure.kind in _DOWN:
        await asyncio.sleep(0.2)
        rec = await client.generate(api, body)  # type: ignore[arg-type]
        if rec.failure is not None and rec.failure.kind in _DOWN:
            raise EndpointDown(rec.failure.message)
    return rec


def _key(entry: dict[str, Any]) -> str:
    """A token's identity across engines: its bytes when given (engines spell partial UTF-8 differently)."""
    raw = entry.get("bytes")
    if isinstance(raw, list) and all(isinstance(b, int) for b in raw):
        return bytes(raw).decode("utf-8", "backslashreplace")
    return str(entry.get("token", ""))


def output_from(rec: RequestRecord) -> Output:
    """Text, tokens and logprobs from a chat or completions record (tokens from stream chunks as a fallback)."""
    if rec.failure is not None:
        return Output(error=rec.failure.message)
    tokens: list[str] = []
    lps: list[float] = []
    tops: list[dict[str, float]] = []
    for entry in rec.logprobs or []:
        if not isinstance(entry, dict):
            continue
        if isinstance(entry.get("content"), list):  # chat shape
            for c in entry["content"]:
                tokens.append(_key(c))
                lps.append(float(c.get("logprob", float("nan"))))
                tops.append({_key(t): float(t.get("logprob", float("nan"))) for t in c.get("top_logprobs") or []})
        elif isinstance(entry.get("tokens"), list):  # completions shape
            tokens.extend(str(t) for t in entry["tokens"])
            lps.extend(float(x) if x is not None else float("nan") for x in entry.get("token_logprobs") or [])
            tops.extend({str(k): float(v) for k, v in (t or {}).items()} for t in entry.get("top_logprobs") or [])
    if tokens:
        return Output(
            text=rec.text,
            tokens=tokens,
            token_source="logprobs",
            logprobs=lps or None,
            top=tops or None,
            finish_reason=rec.finish_reason,
        )
    chunks = [c for c in rec.chunk_text if c]
    return Output(
        text=rec.text, tokens=chunks or None, token_source="chunks" if chunks else None, finish_reason=rec.finish_reason
    )


async def greedy_output(client: EngineClient, model: str, case: PromptCase, top: int = 5) -> Output:
    """Temperature 0 with logprobs; when logprobs are refused, a stream (tokens from the chunks)."""
    body: dict[str, Any] = {
        "model": model,
        "messages": case.as_messages(),
        "temperature": 0,
        "max_tokens": case.max_tokens,
        "logprobs": True,
        "top_logprobs": top,
    }
    rec = await send(client, body)
    if rec.failure is not None and rec.failure.kind == FailureKind.HTTP_STATUS:
        body = {k: v for k, v in body.items() if k not in ("logprobs", "top_logprobs")}
        rec = await send(client, {**body, "stream": True})
    return output_from(rec)
