"""Relaying an opened upstream response to the client: bytes as received, `model` normalised, and an honest
ending. After the first byte has reached the client a broken upstream ends the stream with a well-formed
SSE error event (and `data: [DONE]`), never a silent 200 with a truncated body."""

from __future__ import annotations

import asyncio
import re
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import orjson

from switchover.gateway.observe import Observer
from switchover.gateway.upstream import MAX_EVENT_BYTES, Opened
from switchover.ledger_record import Outcome
from switchover.wire.sse import SSEEvent

Rewrite = Callable[[bytes], bytes]


@dataclass(slots=True)
class Relayed:
    """How the relay ended."""

    outcome: Outcome
    status: int
    error: str | None = None
    response: Any = None  # the front's FrontStream; the handler must return it


def error_event(message: str, model: str | None, code: int = 502, kind: str = "upstream_error") -> bytes:
    """An OpenAI-style in-band error (the openai SDKs raise on an `error` key), a finish_reason of 'error'
    for clients that only read choices, then [DONE]. Starts with a blank line to end any partial event."""
    payload = {
        "error": {"message": message, "type": kind, "code": code},
        "object": "error",
        "model": model,
        "choices": [{"index": 0, "delta": {}, "text": "", "finish_reason": "error"}],
    }
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


def _whole_events(chunk: bytes) -> bool:
    """The read ends at an event boundary (LF framing): no event continues into the next read."""
    return chunk[-2:] == b"\n\n" and b"\r" not in chunk


def without_usage(chunk: bytes) -> bytes | None:
    """A read of whole LF-framed events minus the usage-only ones, cut out of the bytes as read (the rest is
    untouched); None when an event mentioning usage is not a one-line `data:` event (then it is re-framed)."""
    if b'"usage"' not in chunk:
        return chunk
    kept = []
    for block in chunk.split(b"\n\n")[:-1]:
        if b'"usage"' in block:
            if block[:6] != b"data: " or b"\n" in block:
                return None
            if is_usage_only(block[6:]):
                continue
        kept.append(block + b"\n\n")
    return b"".join(kept)


class IdleTimer:
    """Cancels the current task when one read has waited `idle_s`. One timer handle per stream, re-armed only
    when it fires, instead of a new `asyncio.timeout` per read (which costs more than relaying the read)."""

    __slots__ = ("cancelling", "expired", "handle", "idle_s", "loop", "read_since", "task")

    def __init__(self, idle_s: float) -> None:
        self.loop = asyncio.get_running_loop()
        task = asyncio.current_task()
        assert task is not None
        self.task = task
        self.cancelling = task.cancelling()
        self.idle_s = idle_s
        self.read_since: float | None = None  # loop time the pending read started; None between reads
        self.expired = False
        self.handle = self.loop.call_at(self.loop.time() + idle_s, self._fire)

    def _fire(self) -> None:
        since = self.read_since
        if since is not None and self.loop.time() - since >= self.idle_s:
            self.expired = True
            self.task.cancel()
        else:
            self.handle = self.loop.call_at(
                (since if since is not None else self.loop.time()) + self.idle_s, self._fire
            )

    def timed_out(self) -> bool:
        """After a CancelledError: True when this timer caused it (and nobody else cancelled the task)."""
        return self.expired and self.task.uncancel() <= self.cancelling

    def stop(self) -> None:
        self.handle.cancel()


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


class Cutoff:
    """Set by the drain when its limit ends a request that is still running (the relay then says so)."""

    __slots__ = ("cut",)

    def __init__(self) -> None:
        self.cut = False


def _head_out(opened: Opened, rw: Any, strip_usage: bool, cut_usage: bool) -> tuple[bytes, str | None]:
    """What to send of the first read (the bytes `open` already read), and "malformed" when it held a bad event."""
    if opened.obs.malformed:  # a bad event already in the first read: send the good ones, then the error
        good = [ev for ev in opened.head_events if _json_or_done(ev.data)]
        return render(good, rw or _same, strip_usage), "malformed"
    if rw is None:
        return opened.head, None
    cut = without_usage(opened.head) if cut_usage else None
    return (cut if cut is not None else render(opened.head_events, rw, strip_usage)), None


def _stream_fault(obs: Observer) -> str | None:
    """Why a stream must stop now: an event that is not JSON of the expected shape, or one that has grown past
    MAX_EVENT_BYTES without ending (the parser would hold it all: a broken or hostile upstream)."""
    if obs.malformed:
        return "malformed"
    if obs.parser.pending > MAX_EVENT_BYTES:
        return "too_large"
    return None


def _outcome(opened: Opened, failure: str | None, asked: str | None) -> tuple[Relayed, bytes]:
    """How the stream ended, and the error event that closes a cut one (empty when it ended well)."""
    if failure is None and opened.obs.error:
        return Relayed("failed_mid_stream", opened.status, "stream_error"), b""  # the engine's own error event
    if failure is None and not opened.obs.complete:
        failure = "truncated"
    if failure == "drain_cutoff":
        return (
            Relayed("drain_cutoff", opened.status, failure),
            error_event(
                "the gateway is shutting down: this stream was cut at its drain limit", asked, 503, "gateway_shutdown"
            ),
        )
    if failure is not None:
        return (
            Relayed("failed_mid_stream", opened.status, failure),
            error_event(f"upstream failed mid-stream: {failure}", asked),
        )
    return Relayed("ok" if opened.status < 400 else "error", opened.status), b""


async def relay_stream(
    request: Any,
    opened: Opened,
    asked: str | None,
    headers: dict[str, str],
    strip_usage: bool = False,
    cutoff: Cutoff | None = None,
) -> Relayed:
    """Write the SSE response through; returns the outcome. Bytes go through as read unless the model name
    must be rewritten or a usage chunk the client did not ask for must be left out: then events are
    re-framed (payloads are never re-encoded). A stream cut by the drain ends with an error event too."""
    resp = request.open_stream(opened.status, headers)
    obs = opened.obs
    rw = model_rewriter(obs.model, asked)
    if rw is None and strip_usage:
        rw = _same
    # Stripping the usage chunk only: reads that hold whole events go through as read, less the usage-only
    # event; the others are re-framed (an event is never split between a raw read and a re-framed one).
    passthrough = rw is _same
    up = opened.resp
    failure: str | None = None
    clean = False
    timer = IdleTimer(opened.idle_timeout_s)
    loop_time = timer.loop.time
    held = b""  # bytes that arrived with the end of the body: sent with the response's end, in one write
    try:
        aligned = _whole_events(opened.head)
        out, failure = _head_out(opened, rw, strip_usage, passthrough and aligned)
        if failure is not None or up.at_eof():
            held = out
        else:
            await resp.write(out)
        while failure is None:
            timer.read_since = loop_time()
            try:
                chunk = await up.content.readany()
            except asyncio.CancelledError:
                if not timer.timed_out():
                    raise
                failure = "idle_timeout"
                break
            except ConnectionError as exc:
                failure = (
                    "drain_cutoff" if cutoff is not None and cutoff.cut else f"disconnected ({type(exc).__name__})"
                )
                break
            timer.read_since = None
            now = time.perf_counter_ns()
            if not chunk:
                tail = obs.finish(now)
                if tail and rw is not None:
                    held += render(tail, rw, strip_usage)
                break
            events = obs.feed(chunk, now)
            failure = _stream_fault(obs)
            if failure is not None:
                break
            was_aligned, aligned = aligned, _whole_events(chunk)
            cut = without_usage(chunk) if passthrough and was_aligned and aligned else None
            out = chunk if rw is None else cut if cut is not None else render(events, rw, strip_usage)
            if up.at_eof():
                held += out
            elif out:
                await resp.write(out)
        result, last = _outcome(opened, failure, asked)
        clean = result.outcome in ("ok", "error")
        await resp.write_eof(held + last)
        result.response = resp
        return result
    except ConnectionResetError:  # the client went away while we wrote (without handler cancellation)
        return Relayed("client_disconnected", 499, "client went away", resp)
    finally:
        timer.stop()
        if clean:
            up.release()
        else:
            up.close()
