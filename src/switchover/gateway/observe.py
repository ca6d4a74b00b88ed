"""Watching a response as the gateway relays it: first content event, content events, finish_reason, usage,
model, errors. Used by the primary path (upstream.py, relay.py) and the shadow."""

from __future__ import annotations

from typing import Any

import orjson

from switchover.wire.sse import SSEEvent, SSEParser


class Observer:
    """Watches a response as it passes: first content event, content events, finish_reason, usage, model."""

    __slots__ = ("completion_tokens", "content_events", "done", "error", "events", "finish_reason",
                 "first_content_ns", "first_event_ns", "last_ns", "malformed", "model", "parser", "prompt_tokens",
                 "simple")

    def __init__(self) -> None:
        self.parser = SSEParser()
        self.simple = True  # every read so far held whole one-line `data: ` events (LF): parsed here directly
        self.first_event_ns: int | None = None
        self.first_content_ns: int | None = None
        self.last_ns: int | None = None
        self.events = 0
        self.content_events = 0
        self.finish_reason: str | None = None
        self.prompt_tokens: int | None = None
        self.completion_tokens: int | None = None
        self.done = False
        self.error: str | None = None
        self.malformed = False
        self.model: str | None = None

    @property
    def complete(self) -> bool:
        """The stream ended as a stream should: [DONE], or a finish_reason on its last choice."""
        return self.done or self.finish_reason is not None

    def feed(self, chunk: bytes, now_ns: int) -> list[SSEEvent]:
        events = self._simple_events(chunk) if self.simple else None
        if events is None:
            self.simple = False  # from here on the SSEParser sees every byte (it may hold a partial event)
            events = self.parser.feed(chunk)
        for ev in events:
            self._event(ev.data, now_ns)
        return events

    @staticmethod
    def _simple_events(chunk: bytes) -> list[SSEEvent] | None:
        """The events of a read that holds only whole `data: ...` one-line events with LF framing (what
        engines send), as the SSEParser would return them; None for anything else (partial events, CR,
        comments, several data lines, other fields), which then goes to the SSEParser."""
        if chunk[-2:] != b"\n\n" or b"\r" in chunk:
            return None
        blocks = chunk[:-2].split(b"\n\n")
        for block in blocks:
            if block[:6] != b"data: " or b"\n" in block:
                return None
        return [SSEEvent(block[6:]) for block in blocks]

    def finish(self, now_ns: int) -> list[SSEEvent]:
        events = self.parser.finish()
        for ev in events:
            self._event(ev.data, now_ns)
        return events

    def _event(self, data: bytes, now_ns: int) -> None:
        self.events += 1
        if self.first_event_ns is None:
            self.first_event_ns = now_ns
        self.last_ns = now_ns
        if data == b"[DONE]":
            self.done = True
            return
        try:
            obj = orjson.loads(data)
        except orjson.JSONDecodeError:
            self.malformed = True
            return
        if not isinstance(obj, dict):
            self.malformed = True
            return
        self._object(obj, now_ns, streamed=True)

    def body(self, raw: bytes, now_ns: int) -> None:
        """A whole (non-streamed) JSON body."""
        self.last_ns = now_ns
        try:
            obj = orjson.loads(raw) if raw else None
        except orjson.JSONDecodeError:
            self.malformed = True
            return
        if isinstance(obj, dict):
            self._object(obj, now_ns, streamed=False)

    def _object(self, obj: dict[str, Any], now_ns: int, *, streamed: bool) -> None:
        err = obj.get("error")
        if err:
            msg = err.get("message") if isinstance(err, dict) else err
            self.error = str(msg)[:200]
            return
        model = obj.get("model")
        if isinstance(model, str):
            self.model = model
        choices = obj.get("choices")
        if isinstance(choices, list):
            for c in choices:
                if not isinstance(c, dict):
                    continue
                fr = c.get("finish_reason")
                if fr:
                    self.finish_reason = str(fr)
                if streamed:
                    d = c.get("delta")
                    delta: dict[str, Any] = d if isinstance(d, dict) else {}
                    if (c.get("text") or delta.get("content") or delta.get("reasoning_content")
                            or delta.get("tool_calls")):
                        self.content_events += 1
                        if self.first_content_ns is None:
                            self.first_content_ns = now_ns
        usage = obj.get("usage")
        if isinstance(usage, dict):
            pt, ct = usage.get("prompt_tokens"), usage.get("completion_tokens")
            self.prompt_tokens = pt if isinstance(pt, int) else self.prompt_tokens
            self.completion_tokens = ct if isinstance(ct, int) else self.completion_tokens
