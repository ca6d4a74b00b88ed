"""The front's request and response objects: a checked request (FrontRequest, its Headers), a whole answer
(Reply) and a streamed one (FrontStream), and the one error body (OpenAI's shape)."""

from __future__ import annotations

import http
from typing import TYPE_CHECKING, Any

import orjson

from switchover.wire.target import Target

if TYPE_CHECKING:
    from switchover.httpfront.front import FrontConnection

REASONS = {s.value: s.phrase for s in http.HTTPStatus}


class Reply:
    """A whole response: status, headers, body."""

    __slots__ = ("body", "headers", "status")

    def __init__(
        self,
        status: int,
        body: bytes = b"",
        headers: dict[str, str] | None = None,
        content_type: str | None = "application/json",
    ) -> None:
        self.status = status
        self.body = body
        self.headers = headers if headers is not None else {}
        if content_type is not None and "Content-Type" not in self.headers:
            self.headers["Content-Type"] = content_type


def json_reply(obj: Any, status: int = 200) -> Reply:
    return Reply(status, orjson.dumps(obj))


def error_reply(status: int, message: str, kind: str) -> Reply:
    """The gateway's one error body (OpenAI's shape), for every refusal and every handler."""
    return Reply(status, orjson.dumps({"error": {"message": message, "type": kind, "code": status}}))


class Headers:
    """A request's header lines as received (latin-1 text), with first-value lookup by lower-case name."""

    __slots__ = ("_first", "items")

    def __init__(self) -> None:
        self.items: list[tuple[str, str]] = []
        self._first: dict[str, str] = {}

    def add(self, name: str, value: str) -> None:
        self.items.append((name, value))
        self._first.setdefault(name.lower(), value)

    def get(self, name: str, default: str | None = None) -> str | None:
        return self._first.get(name.lower(), default)

    def count(self, name: str) -> int:
        low = name.lower()
        return sum(1 for k, _ in self.items if k.lower() == low)

    def __contains__(self, name: str) -> bool:
        return name.lower() in self._first


class FrontRequest:
    """One complete, checked request."""

    __slots__ = ("_conn", "body", "headers", "keep_alive", "method", "target", "version")

    def __init__(
        self,
        conn: FrontConnection,
        method: str,
        target: Target,
        version: str,
        headers: Headers,
        body: bytes,
        keep_alive: bool,
    ) -> None:
        self._conn = conn
        self.method = method
        self.target = target
        self.version = version
        self.headers = headers
        self.body = body
        self.keep_alive = keep_alive

    @property
    def path(self) -> str:
        """The decoded, checked path (what routing and the allowlist see)."""
        return self.target.path

    @property
    def upstream_target(self) -> str:
        """Path and query as an engine gets them (the checked path, re-encoded)."""
        return self.target.upstream

    @property
    def remote(self) -> str | None:
        return self._conn.peer

    def open_stream(self, status: int, headers: dict[str, str]) -> FrontStream:
        return FrontStream(self._conn, self, status, headers)


class FrontStream:
    """A streamed response (chunked encoding); the status line and headers go with the first write."""

    __slots__ = ("_conn", "_head", "chunked", "status")

    def __init__(self, conn: FrontConnection, request: FrontRequest, status: int, headers: dict[str, str]) -> None:
        self._conn = conn
        self.status = status
        self.chunked = request.version != "1.0"  # an HTTP/1.0 client gets the bytes as they are, then a close
        lines = [f"HTTP/1.1 {status} {REASONS.get(status, 'Unknown')}"]
        lines += [f"{k}: {v}" for k, v in headers.items()]
        if self.chunked:
            lines.append("Transfer-Encoding: chunked")
        if not self.chunked or not conn.keep_after(request):
            lines.append("Connection: close")
            conn.close_after = True
        self._head: bytes | None = ("\r\n".join(lines) + "\r\n\r\n").encode("latin-1")
        conn.streamed = self

    def _frame(self, data: bytes) -> bytes:
        if not data:
            return b""
        return b"%x\r\n%b\r\n" % (len(data), data) if self.chunked else data

    async def write(self, data: bytes) -> None:
        if not data and self._head is None:
            return
        await self._conn.send(self._take_head() + self._frame(data))

    async def write_eof(self, data: bytes = b"") -> None:
        await self._conn.send(self._take_head() + self._frame(data) + (b"0\r\n\r\n" if self.chunked else b""))

    def _take_head(self) -> bytes:
        head, self._head = self._head, None
        return head or b""
