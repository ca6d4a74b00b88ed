"""`switchover review`'s web server: the page and a small JSON API on loopback, served by the gateway's strict
HTTP front (llhttp, limits).

A page on any other site the reviewer visits can send requests to a loopback port, so: the API answers only
requests that carry the session token (in a header a cross-origin page cannot set without a preflight, which is
refused) and whose Host is this server's own loopback address (DNS rebinding); the page forbids framing and
loads nothing from elsewhere. Database access runs in a worker thread so the server never waits on a lock.
"""

from __future__ import annotations

import asyncio
import contextlib
import ipaddress
import secrets
from collections.abc import AsyncIterator
from typing import Any
from urllib.parse import parse_qs

import orjson

from switchover.config.gateway import LimitsConfig
from switchover.errors import BadInput
from switchover.evidence.review_store import ReviewStore
from switchover.httpfront.listener import serve_front
from switchover.httpfront.messages import FrontRequest, Reply, error_reply, json_reply
from switchover.review.page import SCRIPT, page

TOKEN_HEADER = "x-review-token"
MAX_ID = (1 << 62) - 1  # pair ids are SQLite integers: anything larger is not one (and would overflow)
_SECURITY = {
    "X-Frame-Options": "DENY",
    "X-Content-Type-Options": "nosniff",
    "Referrer-Policy": "no-referrer",
    "Cache-Control": "no-store",
    "Content-Security-Policy": "default-src 'none'; script-src 'self'; style-src 'unsafe-inline'; "
    "connect-src 'self'; frame-ancestors 'none'; base-uri 'none'",
}
LIMITS = LimitsConfig(
    max_connections=64, max_connections_per_client=64, max_body_bytes=64 << 10, header_timeout_s=10, body_timeout_s=10
)


def check_loopback(host: str) -> str:
    """The listen host, when it is a loopback address, in its shortest form; BadInput otherwise (the page is for
    one person, here)."""
    name = "127.0.0.1" if host == "localhost" else host
    try:
        addr = ipaddress.ip_address(name)
    except ValueError:
        addr = None
    if addr is None or not addr.is_loopback:
        raise BadInput(
            f"--host must be a loopback address (127.0.0.1, ::1), got {host!r}",
            hint="reach it from elsewhere through an SSH tunnel: ssh -L 8790:127.0.0.1:8790 host",
        )
    return addr.compressed


def url_host(host: str) -> str:
    """An address as it stands in a URL and a Host header ([::1] for IPv6)."""
    return f"[{host}]" if ":" in host else host


class ReviewApp:
    """The handler: page, script, and the API over one ReviewStore."""

    def __init__(self, store: ReviewStore, token: str | None = None) -> None:
        self.store = store
        self.token = token or secrets.token_urlsafe(24)
        self.hosts: set[str] = set()  # Host values this server answers to (set once it is bound)

    def bind(self, port: int, host: str = "127.0.0.1") -> None:
        """Answer to the bound port on the usual loopback names and on the address it listens on (the printed URL)."""
        self.hosts = {f"127.0.0.1:{port}", f"localhost:{port}", f"[::1]:{port}", f"{url_host(host)}:{port}"}

    async def _db(self, fn: Any, *args: Any) -> Any:
        return await asyncio.get_running_loop().run_in_executor(None, fn, *args)

    def _secure(self, reply: Reply) -> Reply:
        reply.headers.update(_SECURITY)
        return reply

    async def __call__(self, request: FrontRequest) -> Reply:
        if (request.headers.get("host") or "") not in self.hosts:
            return error_reply(421, "this server answers to its own loopback address only", "misdirected")
        path, method = request.path, request.method
        if path == "/" and method in ("GET", "HEAD"):
            body = page(self.token, str(self.store.path))
            return self._secure(Reply(200, body, content_type="text/html; charset=utf-8"))
        if path == "/app.js" and method in ("GET", "HEAD"):
            return self._secure(Reply(200, SCRIPT.encode(), content_type="text/javascript; charset=utf-8"))
        if not path.startswith("/api/"):
            return error_reply(404, f"no page at {path[:80]}", "not_found")
        given = request.headers.get(TOKEN_HEADER) or ""
        if not secrets.compare_digest(given.encode(), self.token.encode()):
            return error_reply(403, "missing or wrong review token (load the page from this server)", "forbidden")
        try:
            return self._secure(await self._api(path, method, request))
        except BadInput as exc:
            return error_reply(400, exc.message, "invalid_request_error")

    async def _api(self, path: str, method: str, request: FrontRequest) -> Reply:
        if path == "/api/summary" and method == "GET":
            return json_reply((await self._db(self.store.summary)).model_dump())
        if path == "/api/next" and method == "GET":
            q = parse_qs(request.target.query)
            types = q.get("type")
            kind = types[0] if types else None
            try:
                after = int((q.get("after") or ["0"])[0])
            except ValueError:
                raise BadInput("after must be a pair id") from None
            if not 0 <= after <= MAX_ID:
                raise BadInput(f"after must be a pair id (0-{MAX_ID})")
            pair = await self._db(self.store.next_unrated, kind, after)
            summary = await self._db(self.store.summary)
            return json_reply({"pair": pair.model_dump() if pair else None, "summary": summary.model_dump()})
        if path == "/api/rate" and method == "POST":
            try:
                body = orjson.loads(request.body)
            except orjson.JSONDecodeError:
                raise BadInput("the body must be JSON") from None
            pid = body.get("pair_id") if isinstance(body, dict) else None
            if (
                not isinstance(pid, int)
                or isinstance(pid, bool)
                or not 0 < pid <= MAX_ID
                or not isinstance(body.get("rating"), str)
            ):
                raise BadInput('send {"pair_id": <int>, "rating": "better|same|worse|broken", "note": "..."}')
            note, rater = body.get("note") or "", body.get("rater") or ""
            if not isinstance(note, str) or not isinstance(rater, str):
                raise BadInput("note and rater are strings")
            row = await self._db(self.store.rate, body["pair_id"], body["rating"], note, rater)
            summary = await self._db(self.store.summary)
            return json_reply({"rated": row.model_dump(), "summary": summary.model_dump()})
        return error_reply(
            405 if path in ("/api/summary", "/api/next", "/api/rate") else 404,
            f"{method} {path[:80]} is not part of the review API",
            "not_found",
        )


@contextlib.asynccontextmanager
async def serving(app: ReviewApp, host: str = "127.0.0.1", port: int = 0) -> AsyncIterator[str]:
    """Serve the review app on loopback; yields its URL."""
    host = check_loopback(host)
    try:
        ctx = serve_front(app, host, port, LIMITS)
        server, _ = await ctx.__aenter__()
    except OSError as exc:
        raise BadInput(f"--port: cannot bind {host}:{port}: {exc.strerror or exc}") from None
    try:
        bound = server.sockets[0].getsockname()[1]
        app.bind(bound, host)
        yield f"http://{url_host(host)}:{bound}/"
    finally:
        await ctx.__aexit__(None, None, None)
