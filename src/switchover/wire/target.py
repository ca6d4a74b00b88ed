"""The request target, as a client sent it, turned into the one path the gateway will forward (pure; here in wire/
so the config schema can check paths without importing the gateway).

Only origin-form (`/path[?query]`, RFC 9112 §3.2.1) is accepted: absolute-form, authority-form, asterisk-form,
`//host` and anything else that could name another host are refused, so the upstream URL is always the configured
base URL plus a path the gateway checked. The path is percent-decoded once (an encoded `/`, `\\` or NUL is refused
rather than decoded), dot segments, empty segments and control characters are refused, and the decoded path is
what the allowlist is matched against and what is re-encoded for the upstream: the engine sees exactly the path
that was checked.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from urllib.parse import quote

_PCT = re.compile(rb"%([0-9A-Fa-f]{2})")
_BAD_PCT = re.compile(rb"%(?![0-9A-Fa-f]{2})")
_REFUSED_ESCAPES = re.compile(rb"%(2[fF]|5[cC]|00)")
# RFC 3986 query characters (pchar / "/" / "?"); '%' only as a valid escape (checked separately)
_QUERY = re.compile(rb"[A-Za-z0-9\-._~!$&'()*+,;=:@/?%]*")
_PATH_SAFE = "/-._~!$&'()*+,;=:@"


class TargetError(ValueError):
    """A request target the gateway refuses; `status` is the HTTP status to answer with."""

    def __init__(self, message: str, status: int = 400) -> None:
        super().__init__(message)
        self.status = status


@dataclass(frozen=True, slots=True)
class Target:
    """A checked target: `path` decoded (what routing and the allowlist see), `upstream` the path and query as
    sent to the engine."""

    path: str
    query: str
    upstream: str


def _show(raw: bytes) -> str:
    text = raw[:80].decode("latin-1")
    return repr(text + ("…" if len(raw) > 80 else ""))


def normalise_path(raw: str | bytes) -> str:
    """The decoded path of an origin-form target, or TargetError. Never returns a path with dot segments,
    empty segments, a backslash or a control character."""
    data = raw.encode("latin-1") if isinstance(raw, str) else raw
    if not data.startswith(b"/"):
        raise TargetError(f"the path must start with '/', got {_show(data)}")
    if _BAD_PCT.search(data):
        raise TargetError(f"bad percent-escape in {_show(data)}")
    if _REFUSED_ESCAPES.search(data):
        raise TargetError(f"encoded '/', '\\' or NUL in the path {_show(data)}")
    decoded = _PCT.sub(lambda m: bytes((int(m.group(1), 16),)), data)
    try:
        path = decoded.decode("utf-8")
    except UnicodeDecodeError:
        raise TargetError(f"the path {_show(data)} is not UTF-8 once decoded") from None
    if any(c < " " or c == "\x7f" for c in path) or "\\" in path:
        raise TargetError(f"control character or backslash in the path {_show(data)}")
    segments = path.split("/")[1:]
    for i, seg in enumerate(segments):
        if seg in (".", ".."):
            raise TargetError(f"dot segment in the path {_show(data)}")
        if not seg and i < len(segments) - 1:
            raise TargetError(f"empty segment ('//') in the path {_show(data)}")
    return path


def parse_target(raw: bytes) -> Target:
    """Check a request target (bytes as received) and build what is forwarded; TargetError (400) otherwise."""
    if not raw.startswith(b"/") or raw.startswith(b"//"):
        raise TargetError(
            f"the request target must be a path starting with a single '/' (origin-form), got {_show(raw)}"
        )
    if b"#" in raw:
        raise TargetError(f"a fragment ('#') is not allowed in a request target: {_show(raw)}")
    path_b, sep, query_b = raw.partition(b"?")
    path = normalise_path(path_b)
    if sep and (not _QUERY.fullmatch(query_b) or _BAD_PCT.search(query_b)):
        raise TargetError(f"bad character or escape in the query of {_show(raw)}")
    query = query_b.decode("ascii")
    upstream = quote(path, safe=_PATH_SAFE) + ("?" + query if sep else "")
    return Target(path, query, upstream)


def path_allowed(path: str, prefixes: tuple[str, ...] | list[str]) -> bool:
    """True when `path` is one of `prefixes` or below one of them (whole segments: /v1/models covers
    /v1/models/x, not /v1/modelsX)."""
    return any(path == p or path.startswith(p + "/") or p == "/" for p in prefixes)
