"""What one request to an engine produced: timings taken as bytes arrived, text, usage, errors.

`RequestRecord` is a slotted dataclass, not a pydantic model, because the load generator creates one per
request on its hot path; `RequestRecord.to_dict()` / `from_dict()` are the stable serialised form.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from enum import StrEnum
from typing import Any, ClassVar, Literal

from switchover.measure.timing import first_token_ns
from switchover.wire.error_body import ErrorBody

Api = Literal["completions", "chat"]


class FailureKind(StrEnum):
    """Why a request did not complete; each timeout is its own kind."""

    CONNECT = "connect"  # refused, DNS, or connect timeout
    CONNECT_TIMEOUT = "connect_timeout"
    FIRST_BYTE_TIMEOUT = "first_byte_timeout"
    IDLE_TIMEOUT = "idle_timeout"  # gap between two chunks exceeded the idle limit
    TOTAL_TIMEOUT = "total_timeout"
    HTTP_STATUS = "http_status"  # a non-2xx answer
    STREAM_ERROR = "stream_error"  # an error event in the middle of a stream
    PROTOCOL = "protocol"  # a body we could not parse
    TRUNCATED = "truncated"  # the stream ended with neither finish_reason nor [DONE]
    DISCONNECTED = "disconnected"  # the server closed the connection mid-response
    CANCELLED = "cancelled"


@dataclass(slots=True)
class Usage:
    """Token counts as the server reported them."""

    prompt_tokens: int | None = None
    completion_tokens: int | None = None
    total_tokens: int | None = None
    cached_tokens: int | None = None  # usage.prompt_tokens_details.cached_tokens, when reported

    @classmethod
    def from_obj(cls, obj: dict[str, Any]) -> Usage:
        """The counts of a response's `usage` object; a count that is not a whole number in 0..MAX_COUNT (a string,
        a float, a bool, a list, a negative or huge number) is not a count: None, as if unreported."""
        details = obj.get("prompt_tokens_details") or {}
        cached = details.get("cached_tokens") if isinstance(details, dict) else None
        return cls(
            prompt_tokens=_count(obj.get("prompt_tokens")),
            completion_tokens=_count(obj.get("completion_tokens")),
            total_tokens=_count(obj.get("total_tokens")),
            cached_tokens=_count(cached),
        )


MAX_COUNT = (1 << 31) - 1  # token counts are stored as int32 (bench rows' Parquet schema)


def _count(v: object) -> int | None:
    return v if type(v) is int and 0 <= v <= MAX_COUNT else None


@dataclass(slots=True)
class Failure:
    """How a request failed."""

    kind: FailureKind
    message: str
    status: int | None = None
    body: ErrorBody | None = None


@dataclass(slots=True)
class ToolCall:
    """A tool call assembled from a response (streamed deltas concatenated)."""

    index: int
    name: str | None = None
    arguments: str = ""
    id: str | None = None


@dataclass(slots=True)
class RequestRecord:
    """One request and everything observed about it. Times are perf_counter_ns unless named *_wall."""

    detail: ClassVar[bool] = True  # folding keeps texts, reasoning, tool calls, logprobs (wire/fold.py `Folded`)
    api: Api
    stream: bool
    model: str | None
    started_wall: float  # time.time() at send, a label only
    send_ns: int
    status: int | None = None
    headers_ns: int | None = None  # response headers arrived
    first_byte_ns: int | None = None  # first body bytes arrived
    end_ns: int | None = None
    chunk_ns: list[int] = field(default_factory=list)  # arrival of each data event that carried choices
    chunk_text: list[str] = field(default_factory=list)  # text delta of that event ('' for role-only)
    chunk_choice: list[int] = field(default_factory=list)  # choice index of that delta
    texts: dict[int, str] = field(default_factory=dict)  # full text per choice index
    finish_reasons: dict[int, str | None] = field(default_factory=dict)
    usage: Usage | None = None
    usage_ns: int | None = None  # arrival of the usage chunk, when streamed
    response_model: str | None = None  # the `model` the server echoed
    response_id: str | None = None
    done_seen: bool = False  # the stream ended with data: [DONE]
    engine_timings: dict[str, Any] | None = None  # llama.cpp `timings`
    logprobs: list[Any] | None = None  # raw logprob entries of choice 0, when requested
    tool_calls: list[ToolCall] = field(default_factory=list)
    tool_call_chunks: int = 0
    reasoning_text: str = ""
    failure: Failure | None = None
    reconnects: int = 0  # sends repeated because a pooled keep-alive connection was already closed
    body: dict[str, Any] | None = None  # the decoded non-streaming body (kept for probes; omitted in bulk rows)

    @property
    def ok(self) -> bool:
        return self.failure is None

    @property
    def text(self) -> str:
        return self.texts.get(0, "")

    @property
    def finish_reason(self) -> str | None:
        return self.finish_reasons.get(0)

    @property
    def ttft_ns(self) -> int | None:
        """Send to the first chunk carrying text (measure/timing.py; non-streaming: to the whole body)."""
        if not self.stream:
            return None if self.end_ns is None else self.end_ns - self.send_ns
        first = first_token_ns(self.chunk_ns, self.chunk_text)
        return None if first is None else first - self.send_ns

    @property
    def coalesced_chunks(self) -> int:
        """Events that arrived in the same socket read as the event before them (so share its timestamp).

        Non-zero means the client read slower than the server wrote; inter-chunk gaps of those events are
        not observable and ITL statistics should say so. With kernel receive stamps the shared time is the
        arrival of the read's last bytes (TCP reports one time per read), so only the earlier events are late."""
        return sum(1 for a, b in zip(self.chunk_ns, self.chunk_ns[1:], strict=False) if a == b)

    @property
    def e2e_ns(self) -> int | None:
        """Send to the response's last byte (the bench's E2E ends earlier, at the last event with choices)."""
        return None if self.end_ns is None else self.end_ns - self.send_ns

    def to_dict(self, *, keep_body: bool = False) -> dict[str, Any]:
        """JSON-ready form (choice indices become string keys)."""
        d = asdict(self)
        if not keep_body:
            d.pop("body", None)
        d["texts"] = {str(k): v for k, v in self.texts.items()}
        d["finish_reasons"] = {str(k): v for k, v in self.finish_reasons.items()}
        return d

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> RequestRecord:
        d = dict(d)
        if d.get("usage") is not None:
            d["usage"] = Usage(**d["usage"])
        if d.get("failure") is not None:
            f = dict(d["failure"])
            f["kind"] = FailureKind(f["kind"])
            if f.get("body") is not None:
                f["body"] = ErrorBody(**f["body"]) if isinstance(f["body"], dict) else f["body"]
            d["failure"] = Failure(**f)
        d["texts"] = {int(k): v for k, v in (d.get("texts") or {}).items()}
        d["finish_reasons"] = {int(k): v for k, v in (d.get("finish_reasons") or {}).items()}
        d["tool_calls"] = [ToolCall(**t) for t in d.get("tool_calls") or []]
        return cls(**d)
