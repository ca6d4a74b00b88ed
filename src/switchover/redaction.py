"""Secrets never leave switchover in what it writes or prints: one function, used by run directories, the drill,
error messages and (through `redact_data`) every JSON document. What it masks: userinfo in URLs, curl's
`-u user:pass`, bearer/basic credentials, `sk-…`-shaped keys (and a few other well-known key shapes), and the
values of known secret headers and fields (`api_key=…`, `Authorization: …`, `"password": "…"`).
"""

from __future__ import annotations

import logging
import re
from typing import Any

MASK = "***"

SECRET_HEADERS = frozenset(
    {"authorization", "proxy-authorization", "x-api-key", "api-key", "cookie", "set-cookie", "x-switchover-admin"}
)
SECRET_FIELDS = frozenset(
    {
        # not "token": logprob entries are {"token": "Hello", ...} and must survive
        "api_key",
        "apikey",
        "api-key",
        "x-api-key",
        "access_token",
        "refresh_token",
        "secret",
        "client_secret",
        "password",
        "passwd",
        "pwd",
        "authorization",
        "proxy-authorization",
        "cookie",
        "set-cookie",
        "x-switchover-admin",
        "admin_token",
    }
)

_NAMES = "|".join(sorted((re.escape(n) for n in SECRET_FIELDS if "authorization" not in n), key=len, reverse=True))
_FLAGS = r"api[-_]?key|access[-_]token|auth[-_]token|token|secret|client[-_]secret|password|passwd"
_CURL_EDGE = r"\s'\"`()\[\]{},;|=<>"  # what may precede a curl -u flag, and may not be in its user name
_RULES: tuple[tuple[re.Pattern[str], str], ...] = (
    # scheme://user:pass@host -> scheme://***@host (also user-only and percent-encoded userinfo)
    # (a scheme is at most 32 characters: unbounded, a long run like "ab+ab+…" made this quadratic)
    (re.compile(r"(?i)\b([a-z][a-z0-9+.\-]{0,31}://)[^/\s@'\"<>]+@"), rf"\1{MASK}@"),
    # credentials in a query string: ?token=..., &api_key=..., &sig=...
    (
        re.compile(r"(?i)([?&](?:token|access_token|api_key|apikey|key|sig|signature|password)=)[^&\s'\"#]+"),
        rf"\1{MASK}",
    ),
    # curl -u / --user user:pass, and --user=user:pass (a bare `-u` as in `python -u` has no colon: kept).
    # Linear: the flag starts only after a character the user name may not hold (a blank, a quote, a bracket...),
    # so the stretches two attempts scan never overlap (without that, "(-u(-u…" rescanned the rest at every start)
    (
        re.compile(rf"(?<![^{_CURL_EDGE}])(-u\s*|--user[=\s]\s*)(['\"]?)[^{_CURL_EDGE}:]*:[^\s'\"`]+\2"),
        rf"\1\2{MASK}\2",
    ),
    # the credentials of an Authorization header, whatever its scheme (the scheme word is kept)
    (
        re.compile(
            r"(?i)\b((?:proxy-)?authorization[\"']?\s*[:=]\s*[\"']?(?:[A-Za-z][\w-]*\s+)?)"
            r"(?!\*\*\*)[^\s\"'\r\n,}]+"
        ),
        rf"\1{MASK}",
    ),
    (re.compile(r"(?i)\b(bearer\s+)(?!\*\*\*)[A-Za-z0-9._~+/=\-]{6,}"), rf"\1{MASK}"),
    # command-line flags: --api-key X, --token=X, --password X
    (re.compile(rf"(?i)(?<![\w-])(--?(?:{_FLAGS})(?:=|\s+))(['\"]?)(?!\*\*\*)[^\s'\"]+\2"), rf"\1\2{MASK}\2"),
    # environment assignments: OPENAI_API_KEY=..., HF_TOKEN=..., DB_PASSWORD=...
    (
        re.compile(
            r"\b([A-Z][A-Z0-9_]*_(?:API_KEY|APIKEY|TOKEN|SECRET|PASSWORD|PASSWD|KEY)=)(['\"]?)(?!\*\*\*)[^\s'\"]+\2"
        ),
        rf"\1\2{MASK}\2",
    ),
    # key shapes: OpenAI-style sk-..., Hugging Face hf_..., GitHub ghp_/gho_/github_pat_, Slack xox?-, AWS AKIA...
    (re.compile(r"\bsk-(?!\*\*\*)[A-Za-z0-9_\-]{8,}"), f"sk-{MASK}"),
    (re.compile(r"\b(hf|ghp|gho|ghs|ghu|github_pat)_[A-Za-z0-9_]{12,}"), rf"\1_{MASK}"),
    (re.compile(r"\bxox[abpors]-[A-Za-z0-9\-]{8,}"), f"xox-{MASK}"),
    (re.compile(r"\bAKIA[0-9A-Z]{16}\b"), f"AKIA{MASK}"),
    # name=value / name: value / "name": "value" for secret field and header names
    (
        re.compile(rf"(?i)(?<![\w-])([\"']?(?:{_NAMES})[\"']?\s*[:=]\s*)([\"']?)(?!\*\*\*)[^\s\"',;}}&]+\2"),
        rf"\1\2{MASK}\2",
    ),
)


def redact(text: str) -> str:
    """`text` with every secret it holds replaced by ***; text without secrets comes back unchanged."""
    if not text:
        return text
    for pattern, repl in _RULES:
        text = pattern.sub(repl, text)
    return text


def redact_data(obj: Any) -> Any:
    """A copy of JSON-like data with secrets masked: values under secret field names, and secrets inside strings."""
    if isinstance(obj, str):
        return redact(obj)
    if isinstance(obj, dict):
        return {
            k: (MASK if isinstance(k, str) and k.lower() in SECRET_FIELDS and v not in (None, "") else redact_data(v))
            for k, v in obj.items()
        }
    if isinstance(obj, list | tuple):
        return [redact_data(v) for v in obj]
    return obj


def redact_headers(headers: dict[str, str] | list[tuple[str, str]]) -> list[tuple[str, str]]:
    """Header pairs with the values of known secret headers masked (for logs and error messages)."""
    pairs = headers.items() if isinstance(headers, dict) else headers
    return [(k, MASK if k.lower() in SECRET_HEADERS else redact(v)) for k, v in pairs]


class RedactFilter(logging.Filter):
    """A logging filter that masks secrets in every record's message: attach it to each handler of a log file."""

    def filter(self, record: logging.LogRecord) -> bool:
        message = record.getMessage()
        clean = redact(message)
        if clean != message:
            record.msg, record.args = clean, ()
        return True
