"""Pass-through connections to the old / new engines, and what is observed on them.

The gateway relays the engine's bytes untouched (no per-chunk JSON re-encoding), so it does not use the
`wire` EngineClient, which decodes every response into a RequestRecord, but the wire package's pass-through
HTTP/1.1 client (`wire.passthrough`, same response parser); the shadow uses aiohttp. It watches the same bytes
with `wire.sse.SSEParser` to learn TTFT, token counts, finish_reason and usage.
"""

from __future__ import annotations

import asyncio
import time
from dataclasses import dataclass, field
from typing import Any

import aiohttp
import orjson
from multidict import CIMultiDict
from yarl import URL

from switchover.wire.passthrough import H1Pool, H1Response, UpstreamConnectError
from switchover.wire.sse import SSEEvent, SSEParser

# Headers that describe one hop, or that the gateway sets itself; never forwarded upstream.
HOP_HEADERS = frozenset({
    "connection", "keep-alive", "proxy-connection", "te", "trailer", "transfer-encoding", "upgrade", "host",
    "content-length", "accept-encoding", "proxy-authorization", "x-switchover-route",
})


class Failed(Exception):
    """An upstream attempt that produced nothing usable for the client; `reason` names the fallback reason."""

    def __init__(self, reason: str, status: int | None = None, detail: str = "") -> None:
        super().__init__(f"{reason}{f' ({detail})' if detail else ''}")
        self.reason = reason
        self.status = status
        self.detail = detail


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


@dataclass
class Opened:
    """An upstream response whose status and first event (or whole body) have arrived; nothing sent yet."""

    resp: H1Response
    sse: bool
    idle_timeout_s: float
    head: bytes  # bytes read so far: the whole body (not SSE) or up to the first complete event (SSE)
    head_events: list[SSEEvent]
    obs: Observer = field(default_factory=Observer)

    @property
    def status(self) -> int:
        return self.resp.status

    def close(self) -> None:
        self.resp.close()


def upstream_headers(incoming: Any, api_key: str | None, *, forward_auth: bool = True) -> CIMultiDict[str]:
    """The client's headers minus hop-by-hop ones; Authorization replaced by the endpoint's key when set."""
    out: CIMultiDict[str] = CIMultiDict()
    for k, v in incoming.items():
        lk = k.lower()
        if lk in HOP_HEADERS or (lk == "authorization" and (api_key or not forward_auth)):
            continue
        out.add(k, v)
    if api_key:
        out["Authorization"] = f"Bearer {api_key}"
    return out


def new_session(limit: int = 1024) -> aiohttp.ClientSession:
    """The shadow's pooled keep-alive session (primary requests go through `wire.passthrough.H1Pool`);
    responses are read as received (no decompression)."""
    # Idle pooled connections are dropped after 4 s, below the 5 s keep-alive of uvicorn (vLLM, SGLang) and
    # cpp-httplib (llama-server), so a connection the server is closing is rarely picked (see send()).
    conn = aiohttp.TCPConnector(limit=limit, limit_per_host=0, keepalive_timeout=4, ttl_dns_cache=300)
    return aiohttp.ClientSession(connector=conn, auto_decompress=False, skip_auto_headers=("User-Agent",),
                                 timeout=aiohttp.ClientTimeout(total=None), cookie_jar=aiohttp.DummyCookieJar())


_URLS: dict[str, URL] = {}


def upstream_url(url: str) -> URL:
    """`url` parsed once: aiohttp would parse the same few strings (arm base + path) on every request."""
    found = _URLS.get(url)
    if found is None:
        if len(_URLS) >= 4096:  # many distinct query strings: start over rather than grow
            _URLS.clear()
        found = _URLS[url] = URL(url)
    return found




async def send(session: aiohttp.ClientSession, method: str, url: str | URL, **kw: Any) -> aiohttp.ClientResponse:
    """session.request, retried once when a pooled keep-alive connection turns out to be closed by the server
    before any response byte (the idle-close race); a fresh connection is used for the retry."""
    try:
        return await session.request(method, url, **kw)
    except (aiohttp.ServerDisconnectedError, aiohttp.ClientOSError) as exc:
        if isinstance(exc, aiohttp.ClientConnectorError):
            raise
        return await session.request(method, url, **kw)


async def open_upstream(pool: H1Pool, url: str, *, method: str, headers: CIMultiDict[str],
                        body: bytes | None, first_timeout_s: float, connect_timeout_s: float,
                        idle_timeout_s: float, fail_statuses: frozenset[int] = frozenset()) -> Opened:
    """Send the request; wait for the status and the first SSE event (or the whole non-SSE body) within
    `first_timeout_s`. Raises Failed when nothing usable arrived (connect error, a status in `fail_statuses`,
    timeout, a disconnect before the first event). Later reads are bounded by `idle_timeout_s` (the relay)."""
    resp: H1Response | None = None
    try:
        async with asyncio.timeout(first_timeout_s):
            resp = await pool.request(method, upstream_url(url), headers.items(), body, connect_timeout_s)
            if resp.status in fail_statuses:
                raise Failed(f"status_{resp.status}", resp.status)
            obs = Observer()
            ctype = resp.headers.get("Content-Type", "")
            if resp.status >= 300 or not ctype.startswith("text/event-stream"):
                raw = await resp.read()
                obs.body(raw, time.perf_counter_ns())
                return Opened(resp, False, idle_timeout_s, raw, [], obs)
            head = bytearray()
            events: list[SSEEvent] = []
            while not events:
                chunk = await resp.content.readany()
                if not chunk:
                    events = obs.finish(time.perf_counter_ns())
                    if not events:
                        raise Failed("disconnected", resp.status, "stream ended before its first event")
                    break
                head += chunk
                events = obs.feed(chunk, time.perf_counter_ns())
            return Opened(resp, True, idle_timeout_s, bytes(head), events, obs)
    except Failed:
        if resp is not None:
            resp.close()
        raise
    except TimeoutError:
        if resp is not None:
            resp.close()
        raise Failed("timeout", None, f"no first byte within {first_timeout_s * 1000:g} ms") from None
    except (aiohttp.ClientConnectorError, UpstreamConnectError) as exc:
        raise Failed("connect", None, type(exc).__name__) from None
    except (aiohttp.ClientError, ConnectionError) as exc:
        if resp is not None:
            resp.close()
        raise Failed("disconnected", None, type(exc).__name__) from None
    except BaseException:
        if resp is not None:
            resp.close()
        raise
