"""Watching a response as the gateway relays it, by the rules the bench reads a response with.

The Observer folds every event through wire/fold.py, the one interpreter of a response (what an event is, the first
token, an error event, a malformed one, the end of a stream), into itself: a record that keeps no text. `timings`
then applies measure/timing.py's formulas, the bench's. Used by the primary path (upstream.py, relay.py); the shadow
gets a RequestRecord from the wire client and times it with `record_timings`, the same way.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, ClassVar, Literal

import orjson

from switchover.measure.timing import e2e_ms, first_token_ns, last_event_ns, tpot_ms, ttft_ms
from switchover.wire.fold import apply_events, body_object, ended, fold_body
from switchover.wire.records import Failure, FailureKind, RequestRecord, Usage
from switchover.wire.sse import SSEEvent, SSEParser, whole_events

TokensSource = Literal["usage", "chunks"]
_TALLY_EVERY = 64  # chunk entries held before they are counted and dropped (memory stays flat per stream)


@dataclass(frozen=True, slots=True)
class ObservedTimings:
    """One response's latencies (ms) and token counts, by the bench's formulas (measure/timing.py)."""

    ttft_ms: float | None
    tpot_ms: float | None
    e2e_ms: float | None
    completion_tokens: int | None
    tokens_source: TokensSource | None  # "usage": the server's count; "chunks": events with text (no usage)
    prompt_tokens: int | None
    finish_reason: str | None


def measure(
    t0_ns: int,
    stream: bool,
    *,
    first_ns: int | None,
    last_ns: int | None,
    usage: Usage | None,
    text_events: int,
    finish_reason: str | None,
) -> ObservedTimings:
    """TTFT (streams only), E2E, TPOT (only with N from usage, N >= 2) and N, from when the first token and the
    last event carrying choices (or a whole body) arrived; N falls back to the events with text when usage is
    absent (tokens_source "chunks"), which TPOT never uses."""
    n = usage.completion_tokens if usage is not None else None
    source: TokensSource | None = "usage" if n is not None else None
    if n is None and stream and text_events:
        n, source = text_events, "chunks"
    ttft = ttft_ms(t0_ns, first_ns) if stream else None
    e2e = e2e_ms(t0_ns, last_ns)
    return ObservedTimings(
        ttft_ms=ttft,
        tpot_ms=tpot_ms(ttft, e2e, n) if source == "usage" else None,
        e2e_ms=e2e,
        completion_tokens=n,
        tokens_source=source,
        prompt_tokens=usage.prompt_tokens if usage is not None else None,
        finish_reason=finish_reason,
    )


def record_timings(rec: RequestRecord) -> ObservedTimings:
    """`measure` over a wire client's record (the shadow's): N from usage only, never a count of chunks."""
    first = first_token_ns(rec.chunk_ns, rec.chunk_text)
    last = last_event_ns(rec.chunk_ns) if rec.stream else rec.end_ns
    return measure(
        rec.send_ns,
        rec.stream,
        first_ns=first,
        last_ns=last,
        usage=rec.usage,
        text_events=0,
        finish_reason=rec.finish_reason,
    )


class Observer:
    """Watches a response as it passes: folds its events (wire/fold.py) without keeping text, and counts them."""

    detail: ClassVar[bool] = False  # wire.fold.Folded: keep no text, reasoning, tool calls or logprobs
    __slots__ = (
        "_first_token_ns",
        "_last_event_ns",
        "_text_events",
        "body_ns",
        "chunk_choice",
        "chunk_ns",
        "chunk_text",
        "done_seen",
        "engine_timings",
        "events",
        "failure",
        "finish_reasons",
        "first_event_ns",
        "last_ns",
        "parser",
        "response_id",
        "response_model",
        "simple",
        "status",
        "usage",
        "usage_ns",
    )

    def __init__(self) -> None:
        self.parser = SSEParser()
        self.simple = True  # every read so far held whole one-line `data: ` events (LF): split here directly
        # what wire.fold writes (wire.fold.Folded); the chunk arrays are emptied into the tallies below
        self.status: int | None = None
        self.chunk_ns: list[int] = []
        self.chunk_text: list[str] = []
        self.chunk_choice: list[int] = []
        self.finish_reasons: dict[int, str | None] = {}
        self.usage: Usage | None = None
        self.usage_ns: int | None = None
        self.response_model: str | None = None
        self.response_id: str | None = None
        self.done_seen = False
        self.engine_timings: dict[str, object] | None = None
        self.failure: Failure | None = None
        # tallies
        self.first_event_ns: int | None = None
        self.last_ns: int | None = None  # the last read that completed any event ([DONE] included), or the body
        self.body_ns: int | None = None  # a whole (non-streamed) body arrived
        self.events = 0  # SSE events of any kind
        self._first_token_ns: int | None = None
        self._last_event_ns: int | None = None
        self._text_events = 0

    # ------------------------------------------------------------------ what the gateway reads

    @property
    def malformed(self) -> bool:
        """An event (or the body) was not a JSON object of the expected shape (wire.fold: Failure PROTOCOL)."""
        f = self.failure
        return f is not None and f.kind is FailureKind.PROTOCOL

    @property
    def error(self) -> str | None:
        """The engine's own error (an error event mid-stream, or an error body), or None."""
        f = self.failure
        if f is None or f.kind not in (FailureKind.STREAM_ERROR, FailureKind.HTTP_STATUS):
            return None
        said = f.body.message if f.body is not None else ""
        return (said or f.message)[:200]

    @property
    def complete(self) -> bool:
        """The stream ended as a stream should: [DONE], or a finish_reason on a choice (wire.fold.ended)."""
        return ended(self)

    @property
    def done(self) -> bool:
        return self.done_seen

    @property
    def model(self) -> str | None:
        return self.response_model

    @property
    def finish_reason(self) -> str | None:
        return self.finish_reasons.get(0)

    @property
    def prompt_tokens(self) -> int | None:
        return None if self.usage is None else self.usage.prompt_tokens

    @property
    def completion_tokens(self) -> int | None:
        return None if self.usage is None else self.usage.completion_tokens

    @property
    def first_content_ns(self) -> int | None:
        """Arrival of the first token (the first event with text)."""
        self._tally()
        return self._first_token_ns

    @property
    def content_events(self) -> int:
        """Events with text so far (the count behind tokens_source "chunks")."""
        self._tally()
        return self._text_events

    def timings(self, t0_ns: int, stream: bool) -> ObservedTimings:
        """This response's TTFT, TPOT, E2E and N by the bench's formulas, measured from `t0_ns` (perf_counter_ns)."""
        self._tally()
        last = self._last_event_ns if self._last_event_ns is not None else self.body_ns
        return measure(
            t0_ns,
            stream,
            first_ns=self._first_token_ns,
            last_ns=last,
            usage=self.usage,
            text_events=self._text_events,
            finish_reason=self.finish_reason,
        )

    # ------------------------------------------------------------------ feeding

    def feed(self, chunk: bytes, now_ns: int) -> list[SSEEvent]:
        """One read of an SSE body; returns the events it completed (possibly none)."""
        events = whole_events(chunk) if self.simple else None
        if events is None:
            self.simple = False  # from here on the SSEParser sees every byte (it may hold a partial event)
            events = self.parser.feed(chunk)
        if events:
            self._fold(events, now_ns)
            if len(self.chunk_ns) >= _TALLY_EVERY:
                self._tally()
        return events

    def finish(self, now_ns: int) -> list[SSEEvent]:
        """The end of an SSE body: a last event that lacked its blank line still counts."""
        events = self.parser.finish()
        if events:
            self._fold(events, now_ns)
        return events

    def _fold(self, events: list[SSEEvent], now_ns: int) -> None:
        if self.first_event_ns is None:
            self.first_event_ns = now_ns
        self.last_ns = now_ns
        self.events += len(events)
        apply_events(self, events, now_ns)

    def body(self, raw: bytes, now_ns: int) -> None:
        """A whole (non-streamed) body; an empty one is not malformed."""
        self.last_ns = self.body_ns = now_ns
        if raw:
            obj = body_object(self, raw)
            if obj is not None:
                fold_body(self, obj)

    def _tally(self) -> None:
        """Count the folded events and drop their entries: the first token, the last event, events with text."""
        ns = self.chunk_ns
        if not ns:
            return
        texts = self.chunk_text
        with_text = len(texts) - texts.count("")
        if with_text:
            self._text_events += with_text
            if self._first_token_ns is None:
                self._first_token_ns = first_token_ns(ns, texts)
        self._last_event_ns = ns[-1]
        ns.clear()
        texts.clear()
        self.chunk_choice.clear()


TEXT_CAP = 1 << 20  # characters of an answer kept to check it (a longer one is not judged)


class TextObserver(Observer):
    """An Observer that also keeps choice 0's text (at most TEXT_CAP characters), for answers the gateway
    checks (a request that asked for JSON)."""

    __slots__ = ("_parts", "_size", "cut")

    def __init__(self) -> None:
        super().__init__()
        self._parts: list[str] = []
        self._size = 0
        self.cut = False  # the answer was longer than TEXT_CAP: not judged

    def _keep(self, text: str) -> None:
        if self._size + len(text) > TEXT_CAP:
            self.cut = True
            return
        self._parts.append(text)
        self._size += len(text)

    def _tally(self) -> None:
        if not self.cut:
            for idx, text in zip(self.chunk_choice, self.chunk_text, strict=False):
                if idx == 0 and text:
                    self._keep(text)
        super()._tally()

    def body(self, raw: bytes, now_ns: int) -> None:
        super().body(raw, now_ns)
        if self.failure is not None or not raw:
            return
        try:
            choice = orjson.loads(raw)["choices"][0]
            text = choice["message"]["content"] if "message" in choice else choice.get("text")
        except (orjson.JSONDecodeError, KeyError, IndexError, TypeError, AttributeError):
            return
        if isinstance(text, str):
            self._keep(text)

    @property
    def text(self) -> str | None:
        """Choice 0's text so far; None when it was too long to keep."""
        self._tally()
        return None if self.cut else "".join(self._parts)


def asks_for_json(obj: dict[str, Any] | None) -> bool:
    """The request asked for a JSON answer (response_format json_object or json_schema)."""
    fmt = obj.get("response_format") if obj else None
    return isinstance(fmt, dict) and fmt.get("type") in ("json_object", "json_schema")


def json_valid(text: str | None) -> bool | None:
    """Whether an answer parses as JSON (None: not judged). The schema itself is not checked here: a client's
    schema is untrusted input (its regular expressions could stall the gateway); `switchover verify` checks
    schemas offline."""
    if text is None:
        return None
    try:
        orjson.loads(text)
    except orjson.JSONDecodeError:
        return False
    return True
