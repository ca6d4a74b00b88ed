"""A zero-work OpenAI-style SSE server for measuring clients: every POST streams N pre-encoded chunks.

Run as a separate process so its CPU is not charged to the client:
    python bench/zero_work_server.py PORT [CHUNKS_PER_RESPONSE]
It speaks just enough HTTP/1.1 (keep-alive, Content-Length request bodies, chunked responses).
"""

from __future__ import annotations

import asyncio
import sys

import orjson


def _encode_response(chunks: int) -> bytes:
    def http_chunk(payload: bytes) -> bytes:
        return f"{len(payload):x}\r\n".encode() + payload + b"\r\n"

    body = []
    for i in range(chunks):
        obj = {"id": "z", "object": "chat.completion.chunk", "model": "zero",
               "choices": [{"index": 0, "delta": {"content": "tok"}, "finish_reason": "length" if i == chunks - 1
                            else None}]}
        body.append(http_chunk(b"data: " + orjson.dumps(obj) + b"\n\n"))
    usage = {"id": "z", "model": "zero", "choices": [],
             "usage": {"prompt_tokens": 8, "completion_tokens": chunks, "total_tokens": 8 + chunks}}
    body.append(http_chunk(b"data: " + orjson.dumps(usage) + b"\n\n"))
    body.append(http_chunk(b"data: [DONE]\n\n"))
    head = b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nTransfer-Encoding: chunked\r\n\r\n"
    return head + b"".join(body) + b"0\r\n\r\n"


class _Proto(asyncio.Protocol):
    def __init__(self, response: bytes) -> None:
        self.buf = b""
        self.response = response
        self.transport: asyncio.Transport | None = None

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = transport  # type: ignore[assignment]

    def data_received(self, data: bytes) -> None:
        self.buf += data
        while True:
            end = self.buf.find(b"\r\n\r\n")
            if end < 0:
                return
            head = self.buf[:end].lower()
            length = 0
            for line in head.split(b"\r\n"):
                if line.startswith(b"content-length:"):
                    length = int(line.split(b":", 1)[1])
            if len(self.buf) < end + 4 + length:
                return
            self.buf = self.buf[end + 4 + length:]
            assert self.transport is not None
            self.transport.write(self.response)


async def serve(port: int, chunks: int) -> None:
    response = _encode_response(chunks)
    loop = asyncio.get_running_loop()
    server = await loop.create_server(lambda: _Proto(response), "127.0.0.1", port, backlog=4096)
    print("ready", flush=True)
    async with server:
        await server.serve_forever()


if __name__ == "__main__":
    try:
        import uvloop

        uvloop.install()
    except ImportError:
        pass
    asyncio.run(serve(int(sys.argv[1]), int(sys.argv[2]) if len(sys.argv) > 2 else 64))
