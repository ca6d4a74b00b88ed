"""Relaying an opened upstream response to the client: bytes as received, `model` normalised, and an honest
ending. After the first byte has reached the client a broken upstream ends the stream with a well-formed
SSE error event (and `data: [DONE]`), never a silent 200 with a truncated body."""

from __future__ import annotations

import asyncio
import re
import time
from collections.abc import Callable
from dataclasses import dataclass

import aiohttp
import orjson
from aiohttp import web

from switchover.gateway.upstream import Opened
from switchover.wire.sse import SSEEvent

Rewrite = Callable[[bytes], bytes]


@dataclass(slots=True)
class Relayed:
    """How the relay ended."""

    outcome: str  # a LedgerRecord.Outcome value
    status: int
    error: str | None = None
    response: web.StreamResponse | None = None  # the prepared response; the handler must return it


def error_event(message: str, model: str | None, code: int = 502) -> bytes:
    """An OpenAI-style in-band error (the openai SDKs raise on an `error` key), a finish_reason of 'error'
    for clients that only read choices, then [DONE]. Starts with a blank line to end any partial event."""
    payload = {"error": {"message": message, "type": "upstream_error", "code": code},
               "object": "error", "model": model,
               "choices": [{"index": 0, "delta": {}, "text": "", "finish_reason": "error"}]}
    return b"\n\ndata: " + orjson.dumps(payload) + b"\n\ndata: [DONE]\n\n"


def model_rewriter(upstream_model: str | None, asked: str | None) -> Rewrite | None:
    """A byte-level replacement of the upstream's `"model": "..."` by the asked name; None when they agree."""
    if not asked or not upstream_model or upstream_model == asked:
        return None
    pattern = re.compile(rb'"model"\s*:\s*' + re.escape(orjson.dumps(upstream_model)))
    replacement = b'"model":' + orjson.dumps(asked).replace(b"\\", b"\\\\")
    return lambda data: pattern.sub(replacement, data, count=1)


_EMPTY_CHOICES = re.compile(rb'"choices"\s*:\s*\[\s*\]')


def is_usage_only(data: bytes) -> bool:
    """The extra chunk `stream_options.include_usage` adds: no choices, only usage."""
    return b'"usage"' in data and _EMPTY_CHOICES.search(data) is not None


def render(events: list[SSEEvent], rewrite: Rewrite, strip_usage: bool = False) -> bytes:
    """Events re-framed as SSE, payload bytes unchanged except the model rewrite; with `strip_usage`, the
    usage-only chunk the gateway asked for (the client did not) is left out."""
    out = bytearray()
    for ev in events:
        if strip_usage and is_usage_only(ev.data):
            continue
        if ev.event:
            out += b"event: " + ev.event.encode() + b"\n"
        for line in rewrite(ev.data).split(b"\n"):
            out += b"data: " + line + b"\n"
        out += b"\n"
    return bytes(out)


def _same(data: bytes) -> bytes:
    return data


def _json_or_done(data: bytes) -> bool:
    if data == b"[DONE]":
        return True
    try:
        orjson.loads(data)
    except orjson.JSONDecodeError:
        return False
    return True


def normalised_body(opened: Opened, asked: str | None) -> bytes:
    """A non-streamed body with `model` set to what the client asked for (parsed only when they differ)."""
    raw = opened.head
    if opened.status < 300 and asked and opened.obs.model and opened.obs.model != asked:
        try:
            obj = orjson.loads(raw)
            obj["model"] = asked
            raw = orjson.dumps(obj)
        except (orjson.JSONDecodeError, TypeError):
            pass
    return raw


async def relay_stream(request: web.Request, opened: Opened, asked: str | None,
                       headers: dict[str, str], strip_usage: bool = False) -> Relayed:
    """Write the SSE response through; returns the outcome. Bytes go through as read unless the model name
    must be rewritten or a usage chunk the client did not ask for must be left out: then events are
    re-framed (payloads are never re-encoded)."""
    resp = web.StreamResponse(status=opened.status, headers=headers)
    await resp.prepare(request)
    obs = opened.obs
    rw = model_rewriter(obs.model, asked)
    if rw is None and strip_usage:
        rw = _same
    up = opened.resp
    failure: str | None = None
    clean = False
    try:
        if obs.malformed:  # a bad event already in the first read: send the good ones, then the error
            failure = "malformed"
            good = [ev for ev in opened.head_events if _json_or_done(ev.data)]
            await resp.write(render(good, rw or _same, strip_usage))
        else:
            await resp.write(opened.head if rw is None else render(opened.head_events, rw, strip_usage))
        while failure is None:
            try:
                async with asyncio.timeout(opened.idle_timeout_s):
                    chunk = await up.content.readany()
            except TimeoutError:
                failure = "idle_timeout"
                break
            except (aiohttp.ClientError, ConnectionError) as exc:
                failure = f"disconnected ({type(exc).__name__})"
                break
            now = time.perf_counter_ns()
            if not chunk:
                tail = obs.finish(now)
                if tail and rw is not None:
                    await resp.write(render(tail, rw, strip_usage))
                break
            events = obs.feed(chunk, now)
            if obs.malformed:
                failure = "malformed"
                break
            if rw is None:
                await resp.write(chunk)
            elif events:
                await resp.write(render(events, rw, strip_usage))
        if failure is None and obs.error:
            result = Relayed("failed_mid_stream", opened.status, "stream_error")  # the engine's own error event
        else:
            if failure is None and not obs.complete:
                failure = "truncated"
            if failure is not None:
                await resp.write(error_event(f"upstream failed mid-stream: {failure}", asked))
                result = Relayed("failed_mid_stream", opened.status, failure)
            else:
                result = Relayed("ok" if opened.status < 400 else "error", opened.status)
                clean = True
        await resp.write_eof()
        result.response = resp
        return result
    except ConnectionResetError:  # the client went away while we wrote (without handler cancellation)
        return Relayed("client_disconnected", 499, "client went away", resp)
    finally:
        if clean:
            up.release()
        else:
            up.close()
