"""The write side of a front connection: whole replies, streamed parts with back-pressure (a client that reads
nothing for `send_timeout_s` is cut off), and `100 Continue`. A mixin of `front.FrontConnection`, which owns the
state named below."""

from __future__ import annotations

import asyncio
from typing import TYPE_CHECKING, Any

from switchover.httpfront.messages import REASONS, FrontRequest, Reply

if TYPE_CHECKING:
    from switchover.httpfront.listener import Front


class ReplyWriter:
    """Writes to the connection's transport; the state is the connection's (set in its __init__)."""

    front: Front
    limits: Any
    transport: Any
    closed: bool
    _drain: asyncio.Future[None] | None
    _paused_writing: bool
    _continue: bool

    def _send_continue(self) -> None:
        if self._continue and self.transport is not None and not self.closed:
            self._continue = False
            self.transport.write(b"HTTP/1.1 100 Continue\r\n\r\n")

    def _write_reply(self, resp: Reply, request: FrontRequest | None, keep: bool) -> None:
        body = b"" if request is not None and request.method == "HEAD" else resp.body
        lines = [f"HTTP/1.1 {resp.status} {REASONS.get(resp.status, 'Unknown')}"]
        lines += [f"{k}: {v}" for k, v in resp.headers.items() if k != "Connection"]
        lines.append(f"Content-Length: {len(resp.body)}")
        if not keep:
            lines.append("Connection: close")
        elif request is not None and request.version == "1.0":
            lines.append("Connection: keep-alive")
        if self.transport is not None and not self.transport.is_closing():
            self.transport.write(("\r\n".join(lines) + "\r\n\r\n").encode("latin-1") + body)

    async def send(self, data: bytes) -> None:
        """Write part of a streamed response, waiting while the client's socket buffer is full."""
        if self.closed or self.transport is None or self.transport.is_closing():
            raise ConnectionResetError("the client closed the connection")
        self.transport.write(data)
        while self._paused_writing and not self.closed:
            self._drain = asyncio.get_running_loop().create_future()
            try:  # a reader that stops reading must not hold its connection and its upstream forever
                await asyncio.wait_for(asyncio.shield(self._drain), self.limits.send_timeout_s)
            except TimeoutError:
                self.front.refused("send_timeout", 0, None)
                self.closed = True
                self.transport.abort()
                raise ConnectionResetError("the client read nothing for the send timeout") from None
        if self.closed:
            raise ConnectionResetError("the client closed the connection")

    def pause_writing(self) -> None:
        self._paused_writing = True

    def resume_writing(self) -> None:
        self._paused_writing = False
        self._wake()

    def _wake(self) -> None:
        fut, self._drain = self._drain, None
        if fut is not None and not fut.done():
            fut.set_result(None)
