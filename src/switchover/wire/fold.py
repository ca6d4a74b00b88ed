"""Folding what an engine sent into a RequestRecord: SSE events, whole bodies, failure texts.

The one interpreter of a response: both transports of the wire client fold through it, and so does the gateway's
Observer (gateway/observe.py), so a record and a ledger row mean the same whoever filled them. Its rules:

- an *event* (one per choice in it) is a `data:` event whose `choices` list is not empty; its text is
  `delta.content` (chat) or `text` (completions); the first one with non-empty text is the first token;
- `data: [DONE]` ends the stream: nothing after it counts;
- an *error event* is one of type `event: error`, or whose JSON is an error object (`{"error": ...}` in any of
  the shapes wire/error_body.py reads, or `{"object": "error"}`): Failure STREAM_ERROR, its choices ignored;
- a *malformed* event is one whose data is not a JSON object with the expected structure: Failure PROTOCOL
  (the first failure is kept; an error event replaces it);
- the stream is complete when [DONE] or a finish_reason arrived (`ended`); otherwise it was truncated.
"""

from __future__ import annotations

import errno
import re
from collections.abc import Iterable
from itertools import repeat
from operator import itemgetter
from typing import Any, ClassVar, Protocol, cast

import orjson

from switchover.termtext import printable
from switchover.wire.error_body import ErrorBody, parse_error_obj
from switchover.wire.records import Failure, FailureKind, RequestRecord, ToolCall, Usage

DONE = b"[DONE]"
MAX_BODY = 64 << 20  # bytes of one whole body, or of one unfinished SSE event, a client holds (wire.Timeouts)
_STRUCTURE_ERRORS = (AttributeError, TypeError, ValueError)  # JSON of the wrong shape: malformed, not a crash
_BATCH_MIN = 6  # payloads of one read from which apply_payloads looks for copies (fewer: apply_events)
_WS = rb"[ \t\n\r]*"
_CONTENT_AT = re.compile(rb'.*"content"' + _WS + b":" + _WS + b'"', re.S)  # to the last "content": "
_TEXT_AT = re.compile(rb'.*"text"' + _WS + b":" + _WS + b'"', re.S)
_STRING_REST = re.compile(rb'(?:[^"\\]|\\.)*"', re.S)  # a JSON string after its opening quote
_TEXT_KEY = {True: "content", False: "text"}
_LF = b"\n"


class Folded(Protocol):
    """What folding writes into: a RequestRecord, or the gateway's Observer, which keeps no text (`detail` False:
    reasoning, tool calls, logprobs and whole-body texts are not kept; its chunk arrays are emptied as it goes)."""

    detail: ClassVar[bool]
    status: int | None
    chunk_ns: list[int]
    chunk_text: list[str]
    chunk_choice: list[int]
    finish_reasons: dict[int, str | None]
    usage: Usage | None
    usage_ns: int | None
    response_model: str | None
    response_id: str | None
    done_seen: bool
    engine_timings: dict[str, Any] | None
    failure: Failure | None


def connect_text(url: str, err: OSError | None, fallback: object = None) -> str:
    """'cannot connect to URL: reason' for a failed connect."""
    if isinstance(err, ConnectionRefusedError) or getattr(err, "errno", None) == errno.ECONNREFUSED:
        reason = "connection refused (nothing listening, or the engine is still loading)"
    else:
        reason = (err.strerror if err is not None and err.strerror else None) or str(err or fallback)
    return f"cannot connect to {url}: {reason}"


def err_text(status: int, err: ErrorBody) -> str:
    msg = err.message.strip().splitlines()[0] if err.message.strip() else "(empty body)"
    return f"HTTP {status}: {printable(msg, 300)}"


def too_large(rec: Folded, what: str, limit: int) -> None:
    """Failure PROTOCOL: `what` passed the `limit` bytes a client holds in memory, and was not read further."""
    rec.failure = Failure(FailureKind.PROTOCOL, f"{what} is over {limit} bytes: not read further", rec.status)


def ended(rec: Folded) -> bool:
    """The stream ended as a stream should: [DONE], or a finish_reason on one of its choices."""
    return rec.done_seen or any(v is not None for v in rec.finish_reasons.values())


def error_event(obj: Any, event: str | None, data: bytes) -> ErrorBody | None:
    """The error an SSE event reports (`event: error`, or an error object in any shape); None when it reports none."""
    err = parse_error_obj(obj)
    if err is None and event == "error":
        text = data[:300].decode("utf-8", "replace")
        err = ErrorBody(shape="text", message=text)
    return err


def _malformed(rec: Folded, data: bytes) -> None:
    if rec.failure is None:
        rec.failure = Failure(FailureKind.PROTOCOL, f"malformed SSE data: {data[:120]!r}", rec.status)


def _apply_delta_extras(rec: RequestRecord, delta: dict[str, Any]) -> None:
    if "reasoning_content" in delta or "reasoning" in delta:
        reasoning = delta.get("reasoning_content") or delta.get("reasoning")
        if reasoning:
            rec.reasoning_text += reasoning
    if "tool_calls" in delta:
        tcs = delta["tool_calls"]
        if tcs:
            rec.tool_call_chunks += 1
            _merge_tool_calls(rec, tcs)


def _apply_body_choices(rec: RequestRecord, choices: list[Any]) -> None:
    """Fold the choices of a whole (non-streamed) response."""
    for ch in choices:
        idx = ch.get("index") or 0
        msg = ch.get("message")
        if msg is not None:  # chat
            text = msg.get("content") or ""
            reasoning = msg.get("reasoning_content") or msg.get("reasoning")
            if reasoning:
                rec.reasoning_text += reasoning
            if msg.get("tool_calls"):
                _merge_tool_calls(rec, msg["tool_calls"])
        else:  # completions
            text = ch.get("text") or ""
        rec.texts[idx] = rec.texts.get(idx, "") + text
        fr = ch.get("finish_reason")
        if fr is not None or idx not in rec.finish_reasons:
            rec.finish_reasons[idx] = fr
        lp = ch.get("logprobs")
        if lp is not None and idx == 0:
            if rec.logprobs is None:
                rec.logprobs = []
            rec.logprobs.append(lp)


def join_streamed_text(rec: RequestRecord) -> None:
    """Build the full text of each choice from the streamed chunks."""
    if not any(rec.chunk_choice):  # one choice (index 0), the usual case: one join, no per-chunk steps
        rec.texts = {0: "".join(rec.chunk_text)} if rec.chunk_text else {}
        return
    parts: dict[int, list[str]] = {}
    for idx, text in zip(rec.chunk_choice, rec.chunk_text, strict=True):
        parts.setdefault(idx, []).append(text)
    rec.texts = {idx: "".join(p) for idx, p in parts.items()}


def _merge_tool_calls(rec: RequestRecord, deltas: list[Any]) -> None:
    for d in deltas:
        idx = int(d.get("index", len(rec.tool_calls)) or 0)
        while len(rec.tool_calls) <= idx:
            rec.tool_calls.append(ToolCall(index=len(rec.tool_calls)))
        tc = rec.tool_calls[idx]
        fn = d.get("function") or {}
        if d.get("id"):
            tc.id = d["id"]
        if fn.get("name"):
            tc.name = fn["name"] if tc.name is None else tc.name + fn["name"]
        if fn.get("arguments"):
            args = fn["arguments"]
            tc.arguments += args if isinstance(args, str) else orjson.dumps(args).decode()


def _apply_common(rec: Folded, obj: dict[str, Any], t_ns: int | None) -> None:
    if rec.response_model is None and obj.get("model") is not None:
        rec.response_model = str(obj["model"])
    if rec.response_id is None and obj.get("id") is not None:
        rec.response_id = str(obj["id"])
    usage = obj.get("usage")
    if isinstance(usage, dict):
        rec.usage = Usage.from_obj(usage)
        rec.usage_ns = t_ns
    timings = obj.get("timings")
    if isinstance(timings, dict):
        rec.engine_timings = timings


def apply_events(
    rec: Folded, events: Iterable[tuple[bytes, str | None] | tuple[bytes, str | None, str | None]], t_ns: int
) -> bool:
    """Fold the SSE events one read completed (all stamped `t_ns`) into the record; True once [DONE] was seen
    (events after it are ignored). Runs once per token, so the usual event (one choice, a delta or text) takes the
    fewest steps; streamed text goes to the chunk arrays only (joined once at the end)."""
    if rec.done_seen:
        return True
    loads = orjson.loads
    finish = rec.finish_reasons
    detail = rec.detail
    add_ns, add_text, add_choice = rec.chunk_ns.append, rec.chunk_text.append, rec.chunk_choice.append
    known = rec.response_id is not None and rec.response_model is not None  # id and model: only once
    for ev in events:
        data = ev[0]
        if data == DONE:
            rec.done_seen = True
            return True
        try:
            obj = loads(data)
        except orjson.JSONDecodeError:
            obj = None
        if (
            obj.__class__ is not dict or ev[1] == "error" or "error" in obj or obj.get("object") == "error"
        ) and _error_event(rec, obj, ev[1], data):
            continue
        try:
            choices = obj.get("choices")
            if choices:
                for ch in choices:
                    idx = ch.get("index") or 0
                    delta = ch.get("delta")
                    if delta is not None:  # chat
                        text = delta.get("content") or ""
                        if detail and (len(delta) > 1 or "content" not in delta):  # role, reasoning, tool calls
                            _apply_delta_extras(cast(RequestRecord, rec), delta)
                    else:  # completions
                        text = ch.get("text") or ""
                    add_ns(t_ns)
                    add_text(text)
                    add_choice(idx)
                    fr = ch.get("finish_reason")
                    if fr is not None or idx not in finish:
                        finish[idx] = fr
                    if detail and idx == 0 and "logprobs" in ch and (lp := ch["logprobs"]) is not None:
                        _add_logprobs(cast(RequestRecord, rec), lp)
            if not known or "usage" in obj or "timings" in obj:
                _apply_common(rec, obj, t_ns if obj.get("usage") else None)
                known = rec.response_id is not None and rec.response_model is not None
        except _STRUCTURE_ERRORS:
            _malformed(rec, data)
    return False


def apply_payloads(rec: Folded, payloads: list[bytes], t_ns: int) -> bool:
    """apply_events for the payloads of one read's one-line `data:` events (SSEParser.feed_payloads), with the same
    result in fewer steps: an event is folded as any event, and the events after it that are byte-for-byte copies
    of it but for their text (`_copies`) are folded at once, their texts decoded in one call. Engines answering
    at once send dozens of such events per read; the first event, the last and anything unusual take apply_events."""
    if rec.done_seen:
        return True
    if DONE in payloads:  # nothing after [DONE] counts
        apply_payloads(rec, payloads[: payloads.index(DONE)], t_ns)
        rec.done_seen = True
        return True
    n, i, misses = len(payloads), 0, 0
    while n - i >= _BATCH_MIN and misses < 3:  # a stream of events unlike each other stops looking soon
        ref = payloads[i]
        apply_events(rec, ((ref, None),), t_ns)
        i += 1
        copies = _copies(rec, ref, payloads[i:], t_ns)
        i += copies
        misses += not copies
    apply_events(rec, [(p, None) for p in payloads[i:]], t_ns)
    return False


def _copies(rec: Folded, ref: bytes, rest: list[bytes], t_ns: int) -> int:
    """Fold the leading payloads of `rest` that are `ref`, a plain chunk (`_plain`) already folded, with another
    text in its text's place: each adds a chunk (that text, choice 0) and changes nothing else, as apply_events
    would fold it (its id, model and finish reason are ref's). Returns how many (0: none, the record untouched)."""
    if len(rest) < 2:
        return 0
    slot = _text_slot(ref)
    if slot is None:
        return 0
    head, tail = slot
    lh, lt = len(head), len(tail)
    k = len(rest)
    while k and not (rest[k - 1].startswith(head) and rest[k - 1].endswith(tail)):  # the last events differ
        k -= 1
    same = rest[:k]
    bodies = list(map(itemgetter(slice(lh, -lt)), same))  # each text, in C
    # Payloads hold no LF: two LF-joined lists are equal only payload by payload, so this proves each is
    # head + body + tail (a payload shorter than head and tail together is longer rebuilt)
    if _LF.join(same) != head + (tail + _LF + head).join(bodies) + tail:
        starts = list(map(bytes.startswith, rest, repeat(head)))  # the copies end earlier: where exactly
        k = starts.index(False) if False in starts else k
        ends = list(map(bytes.endswith, rest[:k], repeat(tail)))
        k = ends.index(False) if False in ends else k
        same = rest[:k]
        if k and min(map(len, same)) < lh + lt:
            return 0
        bodies = list(map(itemgetter(slice(lh, -lt)), same))  # each text, in C
    if k < 2:
        return 0
    joined = b'","'.join(bodies)
    if b"\\" in joined:
        if not all(map(_string_body, bodies)):
            return 0
    elif joined.count(b'"') != 2 * (k - 1):  # a quote in a text would end it early
        return 0
    try:
        texts = orjson.loads(b'["' + joined + b'"]')  # each body is one JSON string's inside: k strings
    except orjson.JSONDecodeError:  # a control character or bad escape: apply_events reports it in its place
        return 0
    if len(texts) != k:  # (cannot happen after the checks above)
        return 0
    rec.chunk_ns.extend(repeat(t_ns, k))
    rec.chunk_text.extend(texts)
    rec.chunk_choice.extend(repeat(0, k))
    return k


def _string_body(body: bytes) -> bool:
    """`body` can only be read as the inside of one JSON string: every quote escaped, no backslash escaping the
    closing quote (escape pairs taken left to right, as JSON reads them; orjson then checks the escapes)."""
    rest = body.replace(b"\\\\", b"").replace(b'\\"', b"")
    return b'"' not in rest and not rest.endswith(b"\\")


def _text_slot(ref: bytes) -> tuple[bytes, bytes] | None:
    """(bytes before, bytes after) the text of `ref` when it is a plain chunk (`_plain`): proven by a probe, the
    same bytes with another text in that place, that decodes to the same event with that text; None otherwise."""
    try:
        obj = orjson.loads(ref)
    except orjson.JSONDecodeError:
        return None
    if not _plain(obj):
        return None
    choice = obj["choices"][0]
    chat = choice.get("delta") is not None
    m = (_CONTENT_AT if chat else _TEXT_AT).match(ref)
    end = None if m is None else _STRING_REST.match(ref, m.end())
    if m is None or end is None:
        return None
    head, tail = ref[: m.end()], ref[end.end() - 1 :]
    try:
        probe = orjson.loads(head + b"\\u0001" + tail)
        part = probe["choices"][0]["delta"] if chat else probe["choices"][0]
        part[_TEXT_KEY[chat]] = (choice["delta"] if chat else choice)[_TEXT_KEY[chat]]  # undo it where we think
    except (orjson.JSONDecodeError, *_STRUCTURE_ERRORS, KeyError, IndexError):
        return None
    return (head, tail) if probe == obj else None


def _plain(obj: Any) -> bool:
    """An event apply_events folds into one chunk and nothing else, but for an id and model not known yet: an object
    with no error, usage or timings, one choice of index 0 (or none given) without logprobs, holding only its text
    (`delta` with just `content`, or completions' `text`, a string)."""
    if obj.__class__ is not dict or "error" in obj or "usage" in obj or "timings" in obj:
        return False
    choices = obj.get("choices")
    if obj.get("object") == "error" or choices.__class__ is not list or len(choices) != 1:
        return False
    ch = choices[0]
    if ch.__class__ is not dict or ch.get("index") or ch.get("logprobs") is not None:
        return False
    delta = ch.get("delta")
    if delta is None:
        return ch.get("text").__class__ is str
    return delta.__class__ is dict and len(delta) == 1 and delta.get("content").__class__ is str


def _error_event(rec: Folded, obj: Any, event: str | None, data: bytes) -> bool:
    """An event that is not a JSON object, or says it is an error: recorded as a mid-stream error (or a malformed
    event); True when the event is consumed, False when it is an ordinary chunk after all."""
    err = error_event(obj, event, data)
    if err is not None:
        rec.failure = Failure(FailureKind.STREAM_ERROR, f"error event mid-stream: {err.message[:300]}", rec.status, err)
        return True
    if obj.__class__ is not dict:
        _malformed(rec, data)
        return True
    return False


def _add_logprobs(rec: RequestRecord, lp: Any) -> None:
    if rec.logprobs is None:
        rec.logprobs = []
    rec.logprobs.append(lp)


def body_object(rec: Folded, raw: bytes) -> dict[str, Any] | None:
    """The JSON object of a whole (non-streamed) body; None, with Failure PROTOCOL, when it is not one."""
    try:
        obj = orjson.loads(raw)
    except orjson.JSONDecodeError:
        rec.failure = Failure(FailureKind.PROTOCOL, f"response is not JSON: {raw[:120]!r}", rec.status)
        return None
    if not isinstance(obj, dict):
        rec.failure = Failure(FailureKind.PROTOCOL, "response JSON is not an object", rec.status)
        return None
    return obj


def fold_body(rec: Folded, obj: dict[str, Any]) -> None:
    """Fold a whole body's JSON object: an error object without choices is Failure HTTP_STATUS."""
    err = parse_error_obj(obj)
    if err is not None and not obj.get("choices"):
        rec.failure = Failure(
            FailureKind.HTTP_STATUS, f"error body with status {rec.status}: {err.message}", rec.status, err
        )
        return
    try:
        choices = obj.get("choices") or []
        if rec.detail:
            _apply_body_choices(cast(RequestRecord, rec), choices)
        else:
            for ch in choices:
                idx = ch.get("index") or 0
                fr = ch.get("finish_reason")
                if fr is not None or idx not in rec.finish_reasons:
                    rec.finish_reasons[idx] = fr
        _apply_common(rec, obj, None)
    except _STRUCTURE_ERRORS:
        rec.failure = Failure(FailureKind.PROTOCOL, "response JSON has the wrong structure", rec.status)


def apply_body(rec: RequestRecord, raw: bytes) -> None:
    """Fold a whole (non-streamed) response body into the record."""
    obj = body_object(rec, raw)
    if obj is not None:
        rec.body = obj
        fold_body(rec, obj)
