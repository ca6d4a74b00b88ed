"""Which of a client's headers travel upstream, and which request id is reflected (pure).

Dropped always: the hop-by-hop fields of RFC 9110 §7.6.1 and every field the client's `Connection` header names,
the fields the gateway sets itself (Host, Content-Length), Accept-Encoding (bodies are relayed and observed
uncompressed), the gateway's own control headers, and what a client says about the route it came by (Forwarded,
X-Forwarded-*, X-Real-IP...: spoofable; a primary arm gets `X-Forwarded-For: <the real peer>` instead, a copy
nothing). Credential fields (`clients.credential_headers`, and any field whose name says it holds a key, token,
secret, password, signature or account: X-Goog-Api-Key, Ocp-Apim-Subscription-Key, OpenAI-Organization...)
are dropped too unless the caller keeps them (passthrough to a primary arm); the arm's own key is added where the
client policy says so. Values are forwarded as received: the front's parser has already refused CR, LF and NUL.

A copy (shadow, spot-check pair) also loses the query parameters whose names say the same (`?api_key=`, `?key=`,
`?access_token=`...): `copy_target`.
"""

from __future__ import annotations

import functools
import os
import re
from collections.abc import Iterable
from urllib.parse import unquote_plus

HOP_BY_HOP = frozenset(
    {
        "connection",
        "keep-alive",
        "proxy-connection",
        "te",
        "trailer",
        "transfer-encoding",
        "upgrade",
        "proxy-authorization",
        "proxy-authenticate",
    }
)
GATEWAY_OWN = frozenset(
    {"host", "content-length", "accept-encoding", "expect", "x-switchover-route", "x-switchover-admin"}
)
_REQUEST_ID = re.compile(r"[A-Za-z0-9._:\-]{1,128}")
FORWARDING = frozenset(
    {
        "forwarded",
        "x-real-ip",
        "x-client-ip",
        "true-client-ip",
        "cf-connecting-ip",
        "x-cluster-client-ip",
        "x-original-forwarded-for",
        "client-ip",
    }
)
# a name (header or query parameter) that says it carries a secret or an account: words, split on - _ . or case
_SECRET_WORDS = (
    "key",
    "apikey",
    "token",
    "secret",
    "password",
    "passwd",
    "pass",
    "pwd",
    "auth",
    "authorization",
    "credential",
    "credentials",
    "signature",
    "sig",
    "cookie",
    "organization",
    "project",
    "jwt",
)
_SECRET_NAME = re.compile(r"(?:^|[-_.\s])(?:" + "|".join(_SECRET_WORDS) + r")(?:$|[-_.\s])", re.IGNORECASE)


@functools.lru_cache(maxsize=4096)  # the same header names come back on every request (bounded: names are a client's)
def secret_named(name: str) -> bool:
    """A header or query parameter name that says it carries a credential (`x-goog-api-key`, `api_key`, `key`,
    `OpenAI-Organization`, `access_token`, `sig`)."""
    return _SECRET_NAME.search(name) is not None


def forwarding(name: str) -> bool:
    """A field in which a client describes the route it came by (client address, host, scheme)."""
    return name in FORWARDING or name.startswith("x-forwarded-")


def connection_named(items: Iterable[tuple[str, str]]) -> frozenset[str]:
    """Header names listed in the client's Connection header(s): hop-by-hop by declaration."""
    named: set[str] = set()
    for k, v in items:
        if k.lower() == "connection":
            named.update(t.strip().lower() for t in v.split(",") if t.strip())
    return frozenset(named)


def forward_headers(
    items: list[tuple[str, str]],
    credentials: frozenset[str],
    *,
    keep_credentials: bool,
    api_key: str | None,
    peer: str | None = None,
) -> list[tuple[str, str]]:
    """The header lines an upstream gets: hop-by-hop, gateway-owned and forwarding fields dropped, credential
    fields (listed or credential-named) dropped unless `keep_credentials`, `Authorization: Bearer <api_key>` added
    when a key is given, and `X-Forwarded-For: <peer>` when the client's address is given (primary arms only)."""
    named = connection_named(items) if any(k.lower() == "connection" for k, _ in items) else frozenset()
    drop_credentials = api_key is not None or not keep_credentials
    out = []
    for k, v in items:
        low = k.lower()
        if low in HOP_BY_HOP or low in GATEWAY_OWN or low in named or forwarding(low):
            continue
        if drop_credentials and (low in credentials or secret_named(low)):
            continue
        out.append((k, v))
    if api_key is not None:
        out.append(("Authorization", f"Bearer {api_key}"))
    if peer:
        out.append(("X-Forwarded-For", peer))
    return out


def copy_target(target: str) -> str:
    """A request target for a copy (shadow, spot-check pair): the query parameters whose names say they carry a
    credential removed, the others kept as sent (`?api-version=` stays)."""
    path, sep, query = target.partition("?")
    if not sep:
        return target
    kept = [p for p in query.split("&") if p and not secret_named(unquote_plus(p.partition("=")[0]))]
    return path + ("?" + "&".join(kept) if kept else "")


def request_id(value: str | None) -> str:
    """The client's X-Request-Id when it is a plain token (letters, digits, . _ : -; at most 128), else a new
    random one: nothing else a client sends is reflected into a response header."""
    if value is not None and _REQUEST_ID.fullmatch(value):
        return value
    return os.urandom(16).hex()
