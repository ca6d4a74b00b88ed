"""Pass-through connections to the old / new engines, and what is observed on them.

The gateway relays the engine's bytes untouched (no per-chunk JSON re-encoding), so it does not use the
`wire` EngineClient, which decodes every response into a RequestRecord, but the wire package's pass-through
HTTP/1.1 client (`wire.passthrough`, same response parser); the shadow uses the EngineClient. An Observer
(gateway/observe.py) watches the same bytes, folding them by the bench's rules (`wire.fold`).
"""

from __future__ import annotations

import asyncio
import time
from dataclasses import dataclass, field

from switchover.gateway.jsoncost import count_tokens, parsed_cost
from switchover.gateway.observe import Observer, TextObserver
from switchover.httpfront.budget import Hold
from switchover.wire.passthrough import H1Pool, H1Response, Origin, UpstreamConnectError
from switchover.wire.sse import SSEEvent

MAX_BODY = 256 << 20  # a whole (non-streamed) upstream answer is held to relay it: at most this much
MAX_EVENT_BYTES = 16 << 20  # one SSE event of a stream is held until it ends: at most this much


async def read_bounded(resp: H1Response, limit: int, hold: Hold | None = None) -> bytes:
    """The whole body, or Failed("too_large") past `limit` bytes (the connection is closed). Each read is drawn
    from `hold` as it arrives (OverBudget when the gateway's memory budget has no room for it), and the joined
    copy too while both exist."""
    parts: list[bytes] = []
    size = 0
    while chunk := await resp.readany():
        size += len(chunk)
        if size > limit:
            resp.close()
            raise Failed("too_large", resp.status, f"answer over {limit} bytes")
        if hold is not None:
            hold.add("answer", len(chunk))
        parts.append(chunk)
    if len(parts) < 2:
        return parts[0] if parts else b""
    if hold is not None:
        hold.add("answer", size)  # the join: parts and the whole exist together until parts go
    whole = b"".join(parts)
    parts.clear()
    if hold is not None:
        hold.drop("answer", size)
    return whole


async def observe_body(obs: Observer, raw: bytes, hold: Hold | None) -> None:
    """Fold a whole answer into `obs`; the parse is priced first and drawn from `hold` while it runs."""
    if hold is None or not raw:
        obs.body(raw, time.perf_counter_ns())
        return
    cost = parsed_cost(raw, await count_tokens(raw, 1 << 62) or 0)
    if isinstance(obs, TextObserver):
        cost *= 2  # a text observer parses the answer a second time for its text
    hold.add("parsed_json", cost)
    try:
        obs.body(raw, time.perf_counter_ns())
    finally:
        hold.drop("parsed_json", cost)


class Failed(Exception):
    """An upstream attempt that produced nothing usable for the client; `reason` names the fallback reason."""

    def __init__(self, reason: str, status: int | None = None, detail: str = "") -> None:
        super().__init__(f"{reason}{f' ({detail})' if detail else ''}")
        self.reason = reason
        self.status = status
        self.detail = detail


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


async def _first_events(resp: H1Response, obs: Observer, hold: Hold | None) -> tuple[bytes, list[SSEEvent]]:
    """Read a stream until its first whole event (what is relayed once the upstream has proven itself): the bytes
    read and the events parsed. The first event is held whole, so it is bounded like every later one."""
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
        if len(head) > MAX_EVENT_BYTES:
            raise Failed("too_large", resp.status, f"first event over {MAX_EVENT_BYTES} bytes")
        if hold is not None:
            hold.add("answer", len(chunk))
        events = obs.feed(chunk, time.perf_counter_ns())
    return bytes(head), events


async def open_upstream(
    pool: H1Pool,
    origin: Origin,
    target: str,
    *,
    method: str,
    headers: list[tuple[str, str]],
    body: bytes | None,
    first_timeout_s: float,
    connect_timeout_s: float,
    idle_timeout_s: float,
    fail_statuses: frozenset[int] = frozenset(),
    observer: type[Observer] = Observer,
    hold: Hold | None = None,
) -> Opened:
    """Send the request; wait for the status and the first SSE event (or the whole non-SSE body) within
    `first_timeout_s`. Raises Failed when nothing usable arrived (connect error, a status in `fail_statuses`,
    timeout, a disconnect before the first event). Later reads are bounded by `idle_timeout_s` (the relay).
    What is held draws from `hold` (OverBudget, the connection closed, when the memory budget has no room)."""
    resp: H1Response | None = None
    try:
        async with asyncio.timeout(first_timeout_s):
            resp = await pool.send(method, origin, target, headers, body, connect_timeout_s)
            if resp.status in fail_statuses:
                raise Failed(f"status_{resp.status}", resp.status)
            obs = observer()
            ctype = resp.headers.get("Content-Type", "")
            if resp.status >= 300 or not ctype.startswith("text/event-stream"):
                raw = await read_bounded(resp, MAX_BODY, hold)
                await observe_body(obs, raw, hold)
                return Opened(resp, False, idle_timeout_s, raw, [], obs)
            head, events = await _first_events(resp, obs, hold)
            return Opened(resp, True, idle_timeout_s, head, events, obs)
    except Failed:
        if resp is not None:
            resp.close()
        raise
    except TimeoutError:
        if resp is not None:
            resp.close()
        raise Failed("timeout", None, f"no first byte within {first_timeout_s * 1000:g} ms") from None
    except UpstreamConnectError as exc:
        raise Failed("connect", None, type(exc).__name__) from None
    except ConnectionError as exc:
        if resp is not None:
            resp.close()
        raise Failed("disconnected", None, type(exc).__name__) from None
    except BaseException:
        if resp is not None:
            resp.close()
        raise
