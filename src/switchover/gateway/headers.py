"""Which of a client's headers travel upstream, and which request id is reflected (pure).

Dropped always: the hop-by-hop fields of RFC 9110 §7.6.1 and every field the client's `Connection` header names,
the fields the gateway sets itself (Host, Content-Length), Accept-Encoding (bodies are relayed and observed
uncompressed), and the gateway's own control headers. Credential fields (`clients.credential_headers`) are dropped
too unless the caller keeps them (passthrough to a primary arm); the arm's own key is added where the client
policy says so. Values are forwarded as received: the front's parser has already refused CR, LF and NUL in them.
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterable

HOP_BY_HOP = frozenset({"connection", "keep-alive", "proxy-connection", "te", "trailer", "transfer-encoding",
                        "upgrade", "proxy-authorization", "proxy-authenticate"})
GATEWAY_OWN = frozenset({"host", "content-length", "accept-encoding", "expect", "x-switchover-route",
                         "x-switchover-admin"})
_REQUEST_ID = re.compile(r"[A-Za-z0-9._:\-]{1,128}")


def connection_named(items: Iterable[tuple[str, str]]) -> frozenset[str]:
    """Header names listed in the client's Connection header(s): hop-by-hop by declaration."""
    named: set[str] = set()
    for k, v in items:
        if k.lower() == "connection":
            named.update(t.strip().lower() for t in v.split(",") if t.strip())
    return frozenset(named)


def forward_headers(items: list[tuple[str, str]], credentials: frozenset[str], *, keep_credentials: bool,
                    api_key: str | None) -> list[tuple[str, str]]:
    """The header lines an upstream gets: hop-by-hop and gateway-owned fields dropped, credential fields
    dropped unless `keep_credentials`, and `Authorization: Bearer <api_key>` added when a key is given."""
    named = connection_named(items) if any(k.lower() == "connection" for k, _ in items) else frozenset()
    out = []
    for k, v in items:
        low = k.lower()
        if low in HOP_BY_HOP or low in GATEWAY_OWN or low in named:
            continue
        if low in credentials and (api_key is not None or not keep_credentials):
            continue
        out.append((k, v))
    if api_key is not None:
        out.append(("Authorization", f"Bearer {api_key}"))
    return out


def request_id(value: str | None) -> str:
    """The client's X-Request-Id when it is a plain token (letters, digits, . _ : -; at most 128), else a new
    random one: nothing else a client sends is reflected into a response header."""
    if value is not None and _REQUEST_ID.fullmatch(value):
        return value
    return os.urandom(16).hex()
