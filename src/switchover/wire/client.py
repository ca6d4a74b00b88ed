"""The one engine-facing HTTP client: OpenAI-compatible generation, models, health, metrics, tokenize.

Timing rule: every chunk timestamp is `perf_counter_ns()` taken right after the socket read that
completed it returns, before any JSON parsing. Four timeouts (connect, first byte, idle gap, total) are
reported as four distinct failure kinds. The API key is read from the environment, sent as a header,
and never stored in a record or logged.
"""

from __future__ import annotations

import asyncio
import errno
import os
import time
from dataclasses import dataclass
from typing import Any

import aiohttp
import orjson

from switchover.errors import BadInput
from switchover.wire.error_body import ErrorBody, parse_error_body, parse_error_obj
from switchover.wire.records import Api, Failure, FailureKind, RequestRecord, ToolCall, Usage
from switchover.wire.sse import SSEParser

_PATHS: dict[str, str] = {"completions": "/v1/completions", "chat": "/v1/chat/completions"}
_MAX_ERROR_BODY = 65536


@dataclass(frozen=True, slots=True)
class Timeouts:
    """Seconds allowed for each phase of a request."""

    connect: float = 5.0
    first_byte: float = 120.0
    idle: float = 60.0
    total: float = 900.0


@dataclass(slots=True)
class HttpResult:
    """A plain GET/POST outcome for non-generation endpoints."""

    status: int | None
    body: bytes
    elapsed_ms: float
    failure: Failure | None = None

    def json(self) -> Any:
        return orjson.loads(self.body)


class EngineClient:
    """Async client for one OpenAI-compatible server; use as `async with EngineClient(url) as c:`."""

    def __init__(
        self,
        base_url: str,
        *,
        api_key_env: str | None = None,
        timeouts: Timeouts | None = None,
        max_connections: int = 1024,
    ) -> None:
        if not base_url.startswith(("http://", "https://")):
            raise BadInput(f"URL must start with http:// or https://, got {base_url!r}")
        self.base_url = base_url.rstrip("/")
        self.timeouts = timeouts or Timeouts()
        self._max_connections = max_connections
        self._session: aiohttp.ClientSession | None = None
        self._headers = {"Content-Type": "application/json"}
        if api_key_env:
            key = os.environ.get(api_key_env)
            if key is None:
                raise BadInput(f"environment variable {api_key_env} (api_key_env) is not set")
            self._headers["Authorization"] = f"Bearer {key}"

    def __repr__(self) -> str:  # never shows headers
        return f"EngineClient({self.base_url!r})"

    async def __aenter__(self) -> EngineClient:
        self._open()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    def _open(self) -> aiohttp.ClientSession:
        if self._session is None or self._session.closed:
            connector = aiohttp.TCPConnector(
                limit=self._max_connections, limit_per_host=0, ttl_dns_cache=300, enable_cleanup_closed=True
            )
            self._session = aiohttp.ClientSession(
                connector=connector,
                headers=self._headers,
                timeout=aiohttp.ClientTimeout(
                    total=None, connect=None, sock_connect=self.timeouts.connect, sock_read=None
                ),
                auto_decompress=False,
                skip_auto_headers=("User-Agent",),
            )
        return self._session

    async def close(self) -> None:
        if self._session is not None:
            await self._session.close()
            self._session = None

    # ---------------------------------------------------------------- generation

    async def generate(self, api: Api, body: dict[str, Any], *, include_usage: bool = True) -> RequestRecord:
        """Send one completion or chat request; never raises for engine-side failures."""
        stream = bool(body.get("stream"))
        if stream and include_usage:
            opts = dict(body.get("stream_options") or {})
            opts.setdefault("include_usage", True)
            body = {**body, "stream_options": opts}
        payload = orjson.dumps(body)
        session = self._open()
        rec = RequestRecord(
            api=api,
            stream=stream,
            model=body.get("model"),
            started_wall=time.time(),
            send_ns=time.perf_counter_ns(),
        )
        for attempt in (0, 1):
            try:
                await self._exchange(rec, session, api, payload, stream)
                if stream and not rec.texts and rec.chunk_text:
                    _join_streamed_text(rec)  # a stream that ended in a failure keeps its partial text
                break
            except (aiohttp.ClientOSError, aiohttp.ServerDisconnectedError) as exc:
                # A pooled keep-alive connection the server had already closed (llama-server closes after
                # a stream while still advertising keep-alive): nothing reached the engine, so send once
                # more on a fresh connection and count it.
                if attempt == 0 and rec.headers_ns is None and _stale_connection(exc):
                    rec.reconnects += 1
                    rec.send_ns = time.perf_counter_ns()
                    continue
                rec.end_ns = time.perf_counter_ns()
                rec.failure = Failure(FailureKind.DISCONNECTED, f"server closed the connection: {exc}", rec.status)
                break
        return rec

    async def _exchange(self, rec: RequestRecord, session: aiohttp.ClientSession, api: Api, payload: bytes,
                        stream: bool) -> None:
        """One HTTP exchange; fills `rec`. Raises only the connection errors `generate` may retry."""
        loop = asyncio.get_running_loop()
        t = self.timeouts
        total_deadline = loop.time() + t.total
        phase = FailureKind.FIRST_BYTE_TIMEOUT
        try:
            async with asyncio.timeout_at(min(total_deadline, loop.time() + t.first_byte)) as cm:
                async with session.post(self.base_url + _PATHS[api], data=payload) as resp:
                    rec.headers_ns = time.perf_counter_ns()
                    rec.status = resp.status
                    if resp.status >= 400:
                        raw = await resp.content.read(_MAX_ERROR_BODY)
                        rec.end_ns = time.perf_counter_ns()
                        err = parse_error_body(raw)
                        rec.failure = Failure(FailureKind.HTTP_STATUS, _err_text(resp.status, err), resp.status, err)
                        return
                    if not stream:
                        raw = await resp.read()
                        rec.first_byte_ns = rec.end_ns = time.perf_counter_ns()
                        _apply_body(rec, raw)
                        return
                    content = resp.content
                    data = await content.readany()
                    now_ns = time.perf_counter_ns()
                    rec.first_byte_ns = now_ns
                    phase = FailureKind.IDLE_TIMEOUT
                    parser = SSEParser()
                    while data:
                        # readany() hands out one HTTP chunk at a time; whatever else is already buffered
                        # arrived together with it and gets the same timestamp
                        more = content.read_nowait()
                        if more:
                            data += more
                        for ev in parser.feed(data):
                            if _apply_event(rec, ev.data, ev.event, now_ns):
                                break
                        cm.reschedule(min(total_deadline, loop.time() + t.idle))
                        data = await content.readany()
                        now_ns = time.perf_counter_ns()
                    for ev in parser.finish():
                        _apply_event(rec, ev.data, ev.event, now_ns)
                    rec.end_ns = now_ns
                    _join_streamed_text(rec)
                    if rec.failure is None and not rec.done_seen and not any(
                        v is not None for v in rec.finish_reasons.values()
                    ):
                        rec.failure = Failure(
                            FailureKind.TRUNCATED, "stream ended without finish_reason or [DONE]", rec.status
                        )
        except TimeoutError:
            rec.end_ns = time.perf_counter_ns()
            if loop.time() >= total_deadline - 1e-3:
                phase = FailureKind.TOTAL_TIMEOUT
            limit = {
                FailureKind.FIRST_BYTE_TIMEOUT: t.first_byte,
                FailureKind.IDLE_TIMEOUT: t.idle,
                FailureKind.TOTAL_TIMEOUT: t.total,
            }[phase]
            rec.failure = Failure(phase, f"{phase.value.replace('_', ' ')} after {limit:g} s", rec.status)
        except aiohttp.ClientConnectorError as exc:
            rec.end_ns = time.perf_counter_ns()
            rec.failure = Failure(FailureKind.CONNECT, _connect_text(self.base_url, exc))
        except aiohttp.ConnectionTimeoutError:
            rec.end_ns = time.perf_counter_ns()
            rec.failure = Failure(
                FailureKind.CONNECT_TIMEOUT, f"connect to {self.base_url} timed out after {t.connect:g} s"
            )
        except (aiohttp.ClientOSError, aiohttp.ServerDisconnectedError):
            if rec.headers_ns is None:
                raise  # maybe a stale pooled connection: generate() decides
            rec.end_ns = time.perf_counter_ns()
            rec.failure = Failure(FailureKind.DISCONNECTED, "server closed the connection mid-response", rec.status)
        except (aiohttp.ClientPayloadError, ConnectionResetError) as exc:
            rec.end_ns = time.perf_counter_ns()
            rec.failure = Failure(FailureKind.DISCONNECTED, f"server closed the connection: {exc}", rec.status)
        except aiohttp.ClientError as exc:
            rec.end_ns = time.perf_counter_ns()
            rec.failure = Failure(FailureKind.DISCONNECTED, f"{type(exc).__name__}: {exc}", rec.status)
        except asyncio.CancelledError:
            rec.end_ns = time.perf_counter_ns()
            rec.failure = Failure(FailureKind.CANCELLED, "cancelled by the caller", rec.status)
            raise

    async def complete(self, prompt: str | list[int], **params: Any) -> RequestRecord:
        """POST /v1/completions; `params` are OpenAI request fields (model, max_tokens, stream, ...)."""
        return await self.generate("completions", {"prompt": prompt, **params})

    async def chat(self, messages: list[dict[str, Any]], **params: Any) -> RequestRecord:
        """POST /v1/chat/completions."""
        return await self.generate("chat", {"messages": messages, **params})

    # ---------------------------------------------------------------- other endpoints

    async def request(
        self, method: str, path: str, *, json_body: Any = None, timeout: float | None = None
    ) -> HttpResult:
        """A bounded GET/POST to any path; failures are returned, not raised."""
        session = self._open()
        t0 = time.perf_counter_ns()
        data = None if json_body is None else orjson.dumps(json_body)
        try:
            async with asyncio.timeout(timeout if timeout is not None else self.timeouts.first_byte):
                async with session.request(method, self.base_url + path, data=data) as resp:
                    body = await resp.read()
                    return HttpResult(resp.status, body, (time.perf_counter_ns() - t0) / 1e6)
        except TimeoutError:
            return HttpResult(None, b"", (time.perf_counter_ns() - t0) / 1e6,
                              Failure(FailureKind.FIRST_BYTE_TIMEOUT, f"{method} {path} timed out"))
        except aiohttp.ClientConnectorError as exc:
            return HttpResult(None, b"", (time.perf_counter_ns() - t0) / 1e6,
                              Failure(FailureKind.CONNECT, _connect_text(self.base_url, exc)))
        except aiohttp.ConnectionTimeoutError:
            return HttpResult(None, b"", (time.perf_counter_ns() - t0) / 1e6,
                              Failure(FailureKind.CONNECT_TIMEOUT, f"connect to {self.base_url} timed out"))
        except aiohttp.ClientError as exc:
            return HttpResult(None, b"", (time.perf_counter_ns() - t0) / 1e6,
                              Failure(FailureKind.DISCONNECTED, f"{type(exc).__name__}: {exc}"))

    async def models(self) -> list[str]:
        """Model ids from /v1/models; [] when the list cannot be read."""
        res = await self.request("GET", "/v1/models")
        if res.failure or res.status != 200:
            return []
        try:
            return [str(m["id"]) for m in res.json().get("data", [])]
        except (orjson.JSONDecodeError, AttributeError, KeyError, TypeError):
            return []

    async def health(self) -> HttpResult:
        return await self.request("GET", "/health")

    async def metrics(self) -> HttpResult:
        return await self.request("GET", "/metrics")

    async def tokenize(self, text: str, model: str | None = None, *, add_special: bool = True) -> list[int] | None:
        """Token ids from the server's /tokenize (vLLM, SGLang, llama.cpp); None where it has none."""
        body: dict[str, Any] = {"prompt": text, "content": text, "add_special_tokens": add_special}
        if model:
            body["model"] = model
        res = await self.request("POST", "/tokenize", json_body=body)
        if res.failure or res.status != 200:
            return None
        try:
            obj = res.json()
        except orjson.JSONDecodeError:
            return None
        tokens = obj.get("tokens") if isinstance(obj, dict) else None
        if isinstance(tokens, list):
            return [t if isinstance(t, int) else int(t.get("id", -1)) for t in tokens]
        return None


# -------------------------------------------------------------------- parsing helpers


def _stale_connection(exc: BaseException) -> bool:
    """The error aiohttp raises when a reused keep-alive connection turns out to be closed."""
    if isinstance(exc, aiohttp.ServerDisconnectedError):
        return True
    return "Can not write request body" in str(exc) or isinstance(exc.__cause__, BrokenPipeError | ConnectionResetError)


def _err_text(status: int, err: ErrorBody) -> str:
    msg = err.message.strip().splitlines()[0] if err.message.strip() else "(empty body)"
    return f"HTTP {status}: {msg[:300]}"


def _connect_text(url: str, exc: aiohttp.ClientConnectorError) -> str:
    err = exc.os_error
    if isinstance(err, ConnectionRefusedError) or getattr(err, "errno", None) == errno.ECONNREFUSED:
        reason = "connection refused (nothing listening, or the engine is still loading)"
    else:
        reason = (err.strerror if err is not None and err.strerror else None) or str(err or exc)
    return f"cannot connect to {url}: {reason}"


def _apply_choices(rec: RequestRecord, choices: list[Any], t_ns: int | None) -> None:
    """Fold choices into the record. Streamed text goes to the chunk arrays only (joined once at the end)."""
    for ch in choices:
        idx = ch.get("index") or 0
        delta = ch.get("delta")
        if delta is not None:  # streamed chat
            text = delta.get("content") or ""
            if "reasoning_content" in delta or "reasoning" in delta:
                reasoning = delta.get("reasoning_content") or delta.get("reasoning")
                if reasoning:
                    rec.reasoning_text += reasoning
            if "tool_calls" in delta:
                tcs = delta["tool_calls"]
                if tcs:
                    rec.tool_call_chunks += 1
                    _merge_tool_calls(rec, tcs)
        elif t_ns is not None:  # streamed completions
            text = ch.get("text") or ""
        else:
            msg = ch.get("message")
            if msg is not None:  # non-streamed chat
                text = msg.get("content") or ""
                reasoning = msg.get("reasoning_content") or msg.get("reasoning")
                if reasoning:
                    rec.reasoning_text += reasoning
                if msg.get("tool_calls"):
                    _merge_tool_calls(rec, msg["tool_calls"])
            else:  # non-streamed completions
                text = ch.get("text") or ""
            rec.texts[idx] = rec.texts.get(idx, "") + text
        if t_ns is not None:
            rec.chunk_ns.append(t_ns)
            rec.chunk_text.append(text)
            rec.chunk_choice.append(idx)
        fr = ch.get("finish_reason")
        if fr is not None or idx not in rec.finish_reasons:
            rec.finish_reasons[idx] = fr
        lp = ch.get("logprobs")
        if lp is not None and idx == 0:
            if rec.logprobs is None:
                rec.logprobs = []
            rec.logprobs.append(lp)


def _join_streamed_text(rec: RequestRecord) -> None:
    """Build the full text of each choice from the streamed chunks."""
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


def _apply_common(rec: RequestRecord, obj: dict[str, Any], t_ns: int | None) -> None:
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


def _apply_event(rec: RequestRecord, data: bytes, event: str | None, t_ns: int) -> bool:
    """Fold one SSE event into the record; True when the stream is finished ([DONE] or error)."""
    if data == b"[DONE]":
        rec.done_seen = True
        return True
    try:
        obj = orjson.loads(data)
    except orjson.JSONDecodeError:
        if rec.failure is None:
            rec.failure = Failure(FailureKind.PROTOCOL, f"malformed SSE data: {data[:120]!r}", rec.status)
        return False
    if not isinstance(obj, dict):
        return False
    err = parse_error_obj(obj) if (event == "error" or "error" in obj or obj.get("object") == "error") else None
    if err is not None:
        rec.failure = Failure(FailureKind.STREAM_ERROR, f"error event mid-stream: {err.message[:300]}",
                              rec.status, err)
        return False
    choices = obj.get("choices")
    if choices:
        _apply_choices(rec, choices, t_ns)
    _apply_common(rec, obj, t_ns if obj.get("usage") else None)
    return False


def _apply_body(rec: RequestRecord, raw: bytes) -> None:
    try:
        obj = orjson.loads(raw)
    except orjson.JSONDecodeError:
        rec.failure = Failure(FailureKind.PROTOCOL, f"response is not JSON: {raw[:120]!r}", rec.status)
        return
    if not isinstance(obj, dict):
        rec.failure = Failure(FailureKind.PROTOCOL, "response JSON is not an object", rec.status)
        return
    rec.body = obj
    err = parse_error_obj(obj)
    if err is not None and not obj.get("choices"):
        rec.failure = Failure(FailureKind.HTTP_STATUS, f"error body with status {rec.status}: {err.message}",
                              rec.status, err)
        return
    _apply_choices(rec, obj.get("choices") or [], None)
    _apply_common(rec, obj, None)
