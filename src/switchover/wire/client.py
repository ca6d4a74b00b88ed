"""The one engine-facing HTTP client: OpenAI-compatible generation, models, health, metrics, tokenize.

Timing rule: every chunk timestamp is on the `perf_counter_ns()` clock and says when the bytes that completed it
arrived, before any JSON parsing: the kernel's receive time of the socket read where the platform gives one
(raw transport on Linux), else the time the read returned. `chunk_stamps()` says which a client used.
Four timeouts (connect, first byte, idle gap, total) are reported as four distinct failure kinds. The API key is
read from the environment, sent as a header, and never stored in a record or logged.

Two transports fill the same RequestRecord: `raw` (wire.raw_http: own non-blocking sockets read with recvmsg;
about half aiohttp's client CPU per streamed chunk) for generation over plain http://, and
aiohttp for https:// and every other endpoint. `transport="auto"` picks that way; "raw"/"aiohttp" force one.
"""

from __future__ import annotations

import asyncio
import os
import re
import time
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Literal
from urllib.parse import urlsplit

import aiohttp
import orjson

from switchover.errors import BadInput
from switchover.inputs import base_url as checked_url
from switchover.inputs import env_var_name, shown_env_name
from switchover.wire.error_body import parse_error_body
from switchover.wire.fold import (
    MAX_BODY,
    apply_body,
    apply_events,
    connect_text,
    ended,
    err_text,
    join_streamed_text,
    too_large,
)
from switchover.wire.raw_http import RawPool
from switchover.wire.records import Api, Failure, FailureKind, RequestRecord
from switchover.wire.sse import SSEParser
from switchover.wire.stamps import StampCounts

_PATHS: dict[str, str] = {"completions": "/v1/completions", "chat": "/v1/chat/completions"}
_MAX_ERROR_BODY = 65536
_BAD_FIELD = re.compile(r"[\r\n\x00]").search  # a header that would break its line (or add one)
_SET_HERE = frozenset({"host", "content-length", "transfer-encoding", "connection"})
Transport = Literal["auto", "raw", "aiohttp"]


@dataclass(frozen=True, slots=True)
class Timeouts:
    """Seconds allowed for each phase of a request, and the bytes one answer may hold in memory."""

    connect: float = 5.0
    first_byte: float = 120.0
    idle: float = 60.0
    total: float = 900.0
    max_body: int = MAX_BODY  # a whole (non-streamed) body, or one SSE event still incomplete: past it, PROTOCOL


@dataclass(slots=True)
class HttpResult:
    """A plain GET/POST outcome for non-generation endpoints."""

    status: int | None
    body: bytes
    elapsed_ms: float
    failure: Failure | None = None

    def json(self) -> Any:
        return orjson.loads(self.body)


async def _read_bounded(resp: aiohttp.ClientResponse, limit: int) -> bytes | None:
    """The whole body, or None once it passes `limit` bytes (nothing more is read)."""
    if resp.content_length is not None and resp.content_length > limit:
        return None
    buf = bytearray()
    async for piece in resp.content.iter_any():
        buf += piece
        if len(buf) > limit:
            return None
    return bytes(buf)


class EngineClient:
    """Async client for one OpenAI-compatible server; use as `async with EngineClient(url) as c:`."""

    def __init__(
        self,
        base_url: str,
        *,
        api_key_env: str | None = None,
        timeouts: Timeouts | None = None,
        max_connections: int = 1024,
        transport: Transport = "auto",
    ) -> None:
        try:
            checked_url(base_url)
        except ValueError as exc:
            raise BadInput(f"URL {exc}") from None
        if transport not in ("auto", "raw", "aiohttp"):
            raise BadInput(f"transport must be auto, raw or aiohttp, got {transport!r}")
        self.base_url = base_url.rstrip("/")
        self.timeouts = timeouts or Timeouts()
        self._max_connections = max_connections
        self._session: aiohttp.ClientSession | None = None
        self._headers = {"Content-Type": "application/json"}
        if api_key_env:
            try:  # a key pasted here instead of a variable name must not reach the message below
                env_var_name(api_key_env)
            except ValueError as exc:
                raise BadInput(f"api_key_env {exc}") from None
            key = os.environ.get(api_key_env)
            if key is None:
                raise BadInput(f"environment variable {shown_env_name(api_key_env)} (api_key_env) is not set")
            self._headers["Authorization"] = f"Bearer {key}"
        # generation requests go over raw_http for plain http:// (less client CPU per chunk); https:// and the
        # other endpoints over aiohttp
        parts = urlsplit(self.base_url)
        plain = parts.scheme == "http" and not parts.username and not parts.query and not parts.fragment
        if transport == "raw" and not plain:
            raise BadInput(f"transport='raw' needs a plain http:// URL without credentials, got {base_url!r}")
        self.transport: Transport = "raw" if transport == "raw" or (transport == "auto" and plain) else "aiohttp"
        self._pool: RawPool | None = None
        self._stamps = StampCounts()
        self._aiohttp_streams = 0
        self._raw_heads: dict[str, bytes] = {}
        if self.transport == "raw":
            host = parts.hostname or "127.0.0.1"
            self._raw_addr = (host, parts.port or 80)
            authority = self._raw_authority = parts.netloc
            self._raw_path = parts.path
            for api, path in _PATHS.items():
                lines = [
                    f"POST {parts.path}{path} HTTP/1.1",
                    f"Host: {authority}",
                    "Accept: */*",
                    *(f"{k}: {v}" for k, v in self._headers.items()),
                ]
                try:
                    self._raw_heads[api] = ("\r\n".join(lines) + "\r\nContent-Length: ").encode("latin-1")
                except UnicodeEncodeError:  # never echo the header: it may hold the key
                    raise BadInput("the URL or the API key has characters an HTTP header cannot carry") from None

    def __repr__(self) -> str:  # never shows headers
        return f"EngineClient({self.base_url!r})"

    async def __aenter__(self) -> EngineClient:
        if self.transport == "aiohttp":
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

    def _raw_pool(self) -> RawPool:
        pool = self._pool
        if pool is None or pool.loop is not asyncio.get_running_loop():
            if pool is not None:
                pool.close()
            host, port = self._raw_addr
            pool = self._pool = RawPool(host, port, self.base_url, self._max_connections, self.timeouts, self._stamps)
        return pool

    def chunk_stamps(self) -> str | None:
        """Where this client's generation timestamps came from so far (None: no generation response yet)."""
        raw = self._stamps.describe()
        if not self._aiohttp_streams:
            return raw
        user = f"user space, on arrival in the event loop ({self.transport} transport)"
        return user if raw is None else f"{raw}; {self._aiohttp_streams} responses over aiohttp: {user}"

    async def close(self) -> None:
        if self._pool is not None:
            self._pool.close()
            self._pool = None
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
        rec = RequestRecord(
            api=api, stream=stream, model=body.get("model"), started_wall=time.time(), send_ns=time.perf_counter_ns()
        )
        if self.transport == "raw":
            request = self._raw_heads[api] + b"%d\r\n\r\n" % len(payload) + payload
            # orjson's output keeps its 4 KiB working buffer whatever the body's length: not held while in flight
            # (10,000 open streams held 40 MB of them)
            del payload
            await self._generate_raw(rec, request, stream)
        else:
            await self._generate_aiohttp(rec, self.base_url + _PATHS[api], payload, stream)
        return rec

    async def post(
        self, target: str, payload: bytes, headers: Mapping[str, str], *, stream: bool = True
    ) -> RequestRecord:
        """POST a body the caller built to `target` (path and query, after this client's base URL), with this
        client's headers overridden by `headers` (Host and Content-Length are set here); folded, timed and bounded
        like `generate` (the gateway's shadow mirrors a client's request this way). Raises BadInput for a header
        that cannot be sent; never raises for engine-side failures."""
        fields = {k.lower(): (k, v) for k, v in self._headers.items()}
        for k, v in headers.items():
            if _BAD_FIELD(k) or _BAD_FIELD(v) or not k:
                raise BadInput(f"header {k!r} cannot be sent")  # never echo the value: it may hold a key
            if k.lower() not in _SET_HERE:
                fields[k.lower()] = (k, v)
        path = target.split("?", 1)[0]
        api: Api = "chat" if path.endswith("/chat/completions") else "completions"
        rec = RequestRecord(
            api=api, stream=stream, model=None, started_wall=time.time(), send_ns=time.perf_counter_ns()
        )
        if self.transport == "raw":
            lines = [
                f"POST {self._raw_path}{target} HTTP/1.1",
                f"Host: {self._raw_authority}",
                *(f"{k}: {v}" for k, v in fields.values()),
                f"Content-Length: {len(payload)}",
            ]
            try:
                head = ("\r\n".join(lines) + "\r\n\r\n").encode("latin-1")
            except UnicodeEncodeError:
                raise BadInput("the target or a header has characters HTTP/1.1 cannot carry") from None
            await self._generate_raw(rec, head + payload, stream)
        else:
            await self._generate_aiohttp(rec, self.base_url + target, payload, stream, dict(fields.values()))
        return rec

    async def _generate_aiohttp(
        self, rec: RequestRecord, url: str, payload: bytes, stream: bool, headers: dict[str, str] | None = None
    ) -> None:
        session = self._open()
        self._aiohttp_streams += 1
        for attempt in (0, 1):
            try:
                await self._exchange(rec, session, url, payload, stream, headers)
                if stream and not rec.texts and rec.chunk_text:
                    join_streamed_text(rec)  # a stream that ended in a failure keeps its partial text
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

    async def _generate_raw(self, rec: RequestRecord, request: bytes, stream: bool) -> None:
        """The same exchange over raw_http; a pooled connection found closed before any byte came back
        (llama-server closes after a stream while advertising keep-alive) is resent once on a fresh one."""
        pool = self._raw_pool()
        if await pool.exchange(rec, request, stream, fresh=False):
            rec.reconnects += 1
            rec.send_ns = time.perf_counter_ns()
            if await pool.exchange(rec, request, stream, fresh=True):
                rec.end_ns = time.perf_counter_ns()
                rec.failure = Failure(
                    FailureKind.DISCONNECTED, "server closed the connection before answering", rec.status
                )
        if stream and not rec.texts and rec.chunk_text:
            join_streamed_text(rec)  # a stream that ended in a failure keeps its partial text

    async def _exchange(
        self,
        rec: RequestRecord,
        session: aiohttp.ClientSession,
        url: str,
        payload: bytes,
        stream: bool,
        headers: dict[str, str] | None,
    ) -> None:
        """One HTTP exchange; fills `rec`. Raises only the connection errors `generate` may retry."""
        loop = asyncio.get_running_loop()
        t = self.timeouts
        total_deadline = loop.time() + t.total
        try:
            async with asyncio.timeout_at(min(total_deadline, loop.time() + t.first_byte)) as cm:
                async with session.post(url, data=payload, headers=headers) as resp:
                    rec.headers_ns = time.perf_counter_ns()
                    rec.status = resp.status
                    if resp.status >= 400:
                        raw = await resp.content.read(_MAX_ERROR_BODY)
                        rec.end_ns = time.perf_counter_ns()
                        err = parse_error_body(raw)
                        rec.failure = Failure(FailureKind.HTTP_STATUS, err_text(resp.status, err), resp.status, err)
                        return
                    if not stream:
                        whole = await _read_bounded(resp, t.max_body)
                        rec.first_byte_ns = rec.end_ns = time.perf_counter_ns()
                        if whole is None:
                            too_large(rec, "the response body", t.max_body)
                            resp.close()
                        else:
                            apply_body(rec, whole)
                        return
                    await self._read_stream(rec, resp, cm, total_deadline)
        except TimeoutError:
            rec.end_ns = time.perf_counter_ns()
            # a stream that sent its first bytes waits on the idle timeout from then on
            phase = FailureKind.FIRST_BYTE_TIMEOUT if rec.first_byte_ns is None else FailureKind.IDLE_TIMEOUT
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
            rec.failure = Failure(FailureKind.CONNECT, connect_text(self.base_url, exc.os_error, exc))
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

    async def _read_stream(
        self, rec: RequestRecord, resp: aiohttp.ClientResponse, cm: asyncio.Timeout, total_deadline: float
    ) -> None:
        """Read an SSE body to its end, folding events as they arrive; each read re-arms the idle timeout."""
        loop = asyncio.get_running_loop()
        t = self.timeouts
        content = resp.content
        data = await content.readany()
        now_ns = time.perf_counter_ns()
        rec.first_byte_ns = now_ns
        parser = SSEParser()
        while data:
            # readany() hands out one HTTP chunk at a time; whatever else is already buffered
            # arrived together with it and gets the same timestamp
            more = content.read_nowait()
            if more:
                data += more
            apply_events(rec, parser.feed(data), now_ns)
            if parser.pending > t.max_body:
                rec.end_ns = now_ns
                join_streamed_text(rec)
                too_large(rec, "an unfinished SSE event", t.max_body)
                resp.close()
                return
            cm.reschedule(min(total_deadline, loop.time() + t.idle))
            data = await content.readany()
            now_ns = time.perf_counter_ns()
        apply_events(rec, parser.finish(), now_ns)
        rec.end_ns = now_ns
        join_streamed_text(rec)
        if rec.failure is None and not ended(rec):
            rec.failure = Failure(FailureKind.TRUNCATED, "stream ended without finish_reason or [DONE]", rec.status)

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
                    body = await _read_bounded(resp, self.timeouts.max_body)
                    if body is None:
                        resp.close()
                        return HttpResult(
                            resp.status,
                            b"",
                            (time.perf_counter_ns() - t0) / 1e6,
                            Failure(
                                FailureKind.PROTOCOL,
                                f"{method} {path}: body over {self.timeouts.max_body} bytes",
                                resp.status,
                            ),
                        )
                    return HttpResult(resp.status, body, (time.perf_counter_ns() - t0) / 1e6)
        except TimeoutError:
            return HttpResult(
                None,
                b"",
                (time.perf_counter_ns() - t0) / 1e6,
                Failure(FailureKind.FIRST_BYTE_TIMEOUT, f"{method} {path} timed out"),
            )
        except aiohttp.ClientConnectorError as exc:
            return HttpResult(
                None,
                b"",
                (time.perf_counter_ns() - t0) / 1e6,
                Failure(FailureKind.CONNECT, connect_text(self.base_url, exc.os_error, exc)),
            )
        except aiohttp.ConnectionTimeoutError:
            return HttpResult(
                None,
                b"",
                (time.perf_counter_ns() - t0) / 1e6,
                Failure(FailureKind.CONNECT_TIMEOUT, f"connect to {self.base_url} timed out"),
            )
        except aiohttp.ClientError as exc:
            return HttpResult(
                None,
                b"",
                (time.perf_counter_ns() - t0) / 1e6,
                Failure(FailureKind.DISCONNECTED, f"{type(exc).__name__}: {exc}"),
            )

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
