"""A zero-work OpenAI-compatible streaming server: answers every completion at once with `max_tokens` SSE
events (one pre-rendered write per response shape), so whatever limits the request rate against it is the
client. With `--itl-ms`, events are paced and each event's text is the server's perf_counter_ns at send time
(the same clock as the client's on one machine), so per-chunk timing error can be measured.
Run standalone with `python -m switchover.testing zero --port 0 [--itl-ms 1]` (prints the port).
Under uvloop, pauses below 1 ms round to the loop's millisecond timer: use 0 (all at once) or >= 1 ms.
"""

from __future__ import annotations

import asyncio
import sys
import time

import orjson

from switchover.testing.render import http_chunk as _http_chunk

_HEAD = (
    b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nCache-Control: no-cache\r\n"
    b"Transfer-Encoding: chunked\r\n\r\n"
)
MAX_HEAD = 64 << 10  # bytes of one request head (request line and headers) before its blank line
MAX_REQUEST = 16 << 20  # bytes of one request body the server holds
MAX_EVENTS = 1 << 20  # events of one answer (max_tokens); more is a 400, not an answer built in memory
_MODELS = orjson.dumps({"object": "list", "data": [{"id": "zero", "object": "model"}]})


def _event(chat: bool, text: str, finish: str | None) -> bytes:
    choice: dict[str, object] = {"index": 0, "finish_reason": finish}
    if chat:
        choice["delta"] = {"content": text}
    else:
        choice["text"] = text
    obj = "chat.completion.chunk" if chat else "text_completion"
    return b"data: " + orjson.dumps({"id": "z", "object": obj, "model": "zero", "choices": [choice]}) + b"\n\n"


class _Conn(asyncio.Protocol):
    def __init__(self, server: ZeroWorkServer) -> None:
        self.server = server
        self.buf = b""
        self.transport: asyncio.Transport | None = None

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = transport  # type: ignore[assignment]

    def _refuse(self, why: bytes) -> None:
        """A 400 and the connection closed: a bad request is never a traceback or a growing buffer."""
        self._plain("400 Bad Request", b'{"error":{"message":"' + why + b'"}}')
        assert self.transport is not None
        self.transport.close()
        self.buf = b""

    def data_received(self, data: bytes) -> None:
        self.buf += data
        while True:
            head_end = self.buf.find(b"\r\n\r\n")
            if head_end < 0:
                if len(self.buf) > MAX_HEAD:
                    self._refuse(b"request head too large")
                return
            head = self.buf[:head_end].decode("latin-1")
            length = 0
            for line in head.split("\r\n")[1:]:
                name, _, value = line.partition(":")
                if name.strip().lower() == "content-length":
                    digits = value.strip()  # ASCII digits only: '\xb2' decodes to '²', which isdigit() accepts
                    length = int(digits) if digits.isascii() and digits.isdigit() and len(digits) < 12 else -1
            request_line = head.split("\r\n", 1)[0].split(" ")
            if len(request_line) < 2:
                self._refuse(b"bad request line")
                return
            if not 0 <= length <= MAX_REQUEST:  # a bad or huge Content-Length: refused, not a traceback or a buffer
                self._refuse(b"bad Content-Length")
                return
            if len(self.buf) < head_end + 4 + length:
                return
            body = self.buf[head_end + 4 : head_end + 4 + length]
            self.buf = self.buf[head_end + 4 + length :]
            self.respond(request_line[0], request_line[1], body)

    def _plain(self, status: str, body: bytes) -> None:
        assert self.transport is not None
        self.transport.write(
            b"HTTP/1.1 %s\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n%s"
            % (status.encode(), len(body), body)
        )

    def respond(self, method: str, path: str, body: bytes) -> None:
        if method == "GET":
            self._plain("200 OK", _MODELS if path.startswith("/v1/models") else b'{"status":"ok"}')
            return
        if not path.endswith("/completions"):
            self._plain("404 Not Found", b'{"error":{"message":"not found"}}')
            return
        try:
            req = orjson.loads(body)
            n = int(req.get("max_tokens") or self.server.chunks)
            if n > MAX_EVENTS:
                raise ValueError(n)
        except (orjson.JSONDecodeError, ValueError, TypeError, AttributeError):
            self._plain("400 Bad Request", b'{"error":{"message":"bad request"}}')
            return
        self.server.served += bool(req.get("stream"))
        if req.get("stream") and self.server.fail_after is not None and self.server.served > self.server.fail_after:
            self._plain("500 Internal Server Error", b'{"error":{"message":"injected failure"}}')
            return
        chat = path.endswith("chat/completions")
        p_tokens = prompt_tokens(req)
        if not req.get("stream"):
            text = "x " * n
            choice = {"index": 0, "finish_reason": "length"}
            choice.update({"message": {"role": "assistant", "content": text}} if chat else {"text": text})
            usage = {"prompt_tokens": p_tokens, "completion_tokens": n, "total_tokens": n + p_tokens}
            obj = "chat.completion" if chat else "text_completion"
            answer = {"id": "z", "object": obj, "model": "zero", "choices": [choice], "usage": usage}
            self._plain("200 OK", orjson.dumps(answer))
            return
        if self.server.itl_s > 0:
            task = asyncio.get_running_loop().create_task(self.paced(chat, n, p_tokens))
            self.server.paced_tasks.add(task)  # the loop keeps only a weak reference to a task
            task.add_done_callback(self.server.paced_tasks.discard)
            return
        key = (chat, n, p_tokens)
        cached = self.server.burst_cache.get(key)
        if cached is None:  # all events leave in one write, so one rendering serves every request of this shape
            parts = [_HEAD]
            for i in range(n):
                parts.append(_http_chunk(_event(chat, f"{time.perf_counter_ns()} ", "length" if i == n - 1 else None)))
            parts.append(self._tail(n, p_tokens))
            cached = b"".join(parts)
            if len(self.server.burst_cache) < 64:
                self.server.burst_cache[key] = cached
        assert self.transport is not None
        self.transport.write(cached)

    def _tail(self, n: int, p_tokens: int) -> bytes:
        usage = orjson.dumps(
            {
                "id": "z",
                "object": "text_completion",
                "model": "zero",
                "choices": [],
                "usage": {"prompt_tokens": p_tokens, "completion_tokens": n, "total_tokens": n + p_tokens},
            }
        )
        return _http_chunk(b"data: " + usage + b"\n\ndata: [DONE]\n\n") + b"0\r\n\r\n"

    async def paced(self, chat: bool, n: int, p_tokens: int) -> None:
        t = self.transport
        assert t is not None
        t.write(_HEAD)
        for i in range(n):
            await asyncio.sleep(self.server.itl_s)
            if t.is_closing():
                return
            t.write(_http_chunk(_event(chat, f"{time.perf_counter_ns()} ", "length" if i == n - 1 else None)))
        t.write(self._tail(n, p_tokens))


def prompt_tokens(req: dict[str, object]) -> int:
    """A stand-in tokenizer: one token per whitespace-separated word, plus 1 (BOS), plus 3 per chat message."""
    prompt = req.get("prompt")
    if isinstance(prompt, str):
        return 1 + len(prompt.split())
    msgs = req.get("messages")
    if isinstance(msgs, list):
        return 1 + sum(3 + len(str(m.get("content", "")).split()) for m in msgs if isinstance(m, dict))
    return 1


class ZeroWorkServer:
    """`async with ZeroWorkServer() as s:` serves on 127.0.0.1:s.port in the current event loop."""

    def __init__(self, chunks: int = 128, itl_s: float = 0.0, port: int = 0, fail_after: int | None = None) -> None:
        self.chunks, self.itl_s, self.port = chunks, itl_s, port
        self.fail_after = fail_after  # answer 500 to every streamed generation after this many (tests)
        self.served = 0
        self.burst_cache: dict[tuple[bool, int, int], bytes] = {}
        self.paced_tasks: set[asyncio.Task[None]] = set()  # paced streams being written (removed as they end)
        self._server: asyncio.Server | None = None

    async def start(self) -> int:
        loop = asyncio.get_running_loop()
        self._server = await loop.create_server(lambda: _Conn(self), "127.0.0.1", self.port, backlog=4096)
        self.port = int(self._server.sockets[0].getsockname()[1])
        return self.port

    async def close(self) -> None:
        if self._server is not None:
            self._server.close()
            self._server = None

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    async def __aenter__(self) -> ZeroWorkServer:
        await self.start()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()


async def serve_forever(port: int, chunks: int, itl_ms: float, load_s: float = 0.0) -> None:
    """Serve until killed, after `load_s` seconds of "loading" (nothing listens meanwhile); prints the port."""
    if load_s > 0:
        await asyncio.sleep(load_s)  # the scenario: an engine that takes this long to start listening
    srv = ZeroWorkServer(chunks, itl_ms / 1000, port)
    await srv.start()
    sys.stdout.write(f"{srv.port}\n")
    sys.stdout.flush()
    await asyncio.Event().wait()
