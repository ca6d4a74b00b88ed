"""The rules for values a user supplies — finite numbers in range, counts, ports, fractions, base URLs, host:port,
env-var names, version numbers — one set shared by CLI options (cli/params.py) and config fields (the pydantic
types below), so `nan`, `inf`, `-5`, `0` or `99999` mean the same refusal everywhere. Ceilings keep the work of
any command bounded.
"""

from __future__ import annotations

import math
import re
from typing import Annotated
from urllib.parse import urlsplit

from packaging.version import InvalidVersion, Version
from pydantic import AfterValidator, Field

from switchover.errors import BadInput

PORT_MAX = 65535
MAX_GPUS = 1024  # `plan parallel` enumerates O(N log N) layouts: 1024 GPUs is ~7,000 layouts, well under a second
MAX_TOKENS = 1 << 24  # 16 M tokens: past every context length shipped so far (10 M)
MAX_GIB = 1 << 20  # 1 PiB per GPU
MAX_SECONDS = 7 * 24 * 3600.0  # a week: the longest any wait or budget may be
MAX_MS = MAX_SECONDS * 1000
MAX_COUNT = 1_000_000  # requests per step, concurrency, slots: bounded memory for the bookkeeping
MAX_PARALLEL = 1024  # TP, PP, EP sizes


def _fmt(x: float) -> str:
    return str(int(x)) if float(x).is_integer() and abs(x) < 1e15 else f"{x:g}"


def number_problem(
    value: float, *, lo: float | None = None, hi: float | None = None, lo_open: bool = False, integer: bool = False
) -> str | None:
    """Why `value` is not acceptable (None when it is): not finite, not whole, or outside [lo, hi]."""
    if isinstance(value, float) and not math.isfinite(value):
        return f"must be a finite number, got {value}"
    if integer and not float(value).is_integer():
        return f"must be a whole number, got {value:g}"
    shown = f"{value:g}" if isinstance(value, float) else str(value)
    if lo is not None and (value <= lo if lo_open else value < lo):
        return f"must be {'greater than' if lo_open else 'at least'} {_fmt(lo)}, got {shown}"
    if hi is not None and value > hi:
        return f"must be at most {_fmt(hi)}, got {shown}"
    return None


def require(
    value: float,
    name: str,
    *,
    lo: float | None = None,
    hi: float | None = None,
    lo_open: bool = False,
    integer: bool = False,
) -> float:
    """`value` if acceptable; otherwise BadInput naming `name` (for library entry points called with numbers)."""
    problem = number_problem(value, lo=lo, hi=hi, lo_open=lo_open, integer=integer)
    if problem:
        raise BadInput(f"{name} {problem}")
    return value


def base_url(value: str) -> str:
    """scheme://host[:port][/path], http or https, port 1-65535, no credentials, query or fragment; ValueError."""
    if not isinstance(value, str) or not value.startswith(("http://", "https://")):
        raise ValueError(f"must start with http:// or https://, got {value!r}")
    if any(c in value for c in " \t\r\n\\") or any(ord(c) < 32 or ord(c) == 127 for c in value):
        raise ValueError(f"must not contain spaces, backslashes or control characters: {value!r}")
    try:
        parts = urlsplit(value)
        port = parts.port
    except ValueError as exc:
        if "port" in str(exc).lower():
            raise ValueError(f"port must be 1-{PORT_MAX}: {value!r}") from None
        raise ValueError(f"not a valid URL ({exc}): {value!r}") from None
    if not parts.hostname:
        raise ValueError(f"no host in {value!r}")
    if port is not None and not 1 <= port <= PORT_MAX:
        raise ValueError(f"port must be 1-{PORT_MAX}, got {port}")
    if "@" in parts.netloc:
        raise ValueError("must not hold credentials (user:password@); give the key through an environment variable")
    if parts.query or parts.fragment:
        raise ValueError(f"a base URL is scheme://host[:port][/path], without query or fragment: {value!r}")
    return value.rstrip("/")


_HOST = re.compile(r"^(\[[0-9A-Fa-f:.]+\]|[A-Za-z0-9.\-]+)$")


def host_port(value: str) -> tuple[str, int]:
    """`host:port` (IPv6 in brackets) with a port of 1-65535; ValueError otherwise."""
    host, sep, port_s = value.rpartition(":")
    if not sep or not host or not _HOST.fullmatch(host):
        raise ValueError(f"must be host:port, e.g. 127.0.0.1:9400, got {value!r}")
    if not port_s.isdigit() or not 1 <= int(port_s) <= PORT_MAX:
        raise ValueError(f"port must be 1-{PORT_MAX}, got {port_s!r}")
    return host.strip("[]"), int(port_s)


_ENV = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")


_TOKEN_PREFIXES = ("hf_", "ghp_", "gho_", "ghu_", "ghs_", "ghr_", "github_pat_", "AKIA", "ASIA", "xox")
_HEX = re.compile(r"[0-9A-Fa-f]{24,}")


def _key_shaped(value: str) -> bool:
    """A token pasted where a variable name goes, though valid as a name by syntax: a known token prefix (Hugging
    Face, GitHub, AWS, Slack) with 16 or more characters after it, a long hex string, a long run of mixed-case
    letters and digits, or 24 or more characters without an underscore: names no one gives a variable."""
    if value.startswith(_TOKEN_PREFIXES) and len(value) >= 20:
        return True
    if _HEX.fullmatch(value) or (len(value) >= 24 and "_" not in value):
        return True
    return (
        len(value) >= 32
        and any(c.islower() for c in value)
        and any(c.isupper() for c in value)
        and any(c.isdigit() for c in value)
    )


def shown_env_name(name: str) -> str:
    """An environment variable's name as an error message may show it: a conventional NAME_LIKE_THIS, else not
    shown (a key pasted as a name must never be printed back)."""
    return name if re.fullmatch(r"[A-Z][A-Z0-9_]{0,63}", name) and not _key_shaped(name) else "(name not shown)"


def env_var_name(value: str) -> str:
    """An environment variable name (the key stays in the environment); ValueError, never echoing a pasted key."""
    if _ENV.fullmatch(value) and len(value) <= 128 and not _key_shaped(value):
        return value
    looks_like_key = len(value) >= 16 or value.startswith(("sk-", "hf_", "Bearer"))
    shown = "a value that looks like a key itself" if looks_like_key else repr(value)
    raise ValueError(f"must be the name of an environment variable, like OPENAI_API_KEY, got {shown}")


_LONG_DIGITS = re.compile(r"\d{10}")


def release_version(value: str) -> Version:
    """An engine release in any engine's own spelling as an orderable PEP 440 version: 0.6.3, 0.8.5.post1, 1.2.0rc1
    (before 1.2.0), 2.4.0+cu121, v2.0.2 (TGI's tags), b3995 (llama.cpp's build tags: build 3995). ValueError naming
    the value otherwise (no whitespace, at most 60 characters, no number part over nine digits)."""
    problem = f"{value[:40]!r} is not a version number (a release such as 0.6.3, 1.2.0rc1, v2.0.2 or b3216)"
    if not value or len(value) > 60 or value != value.strip() or not value.isascii() or _LONG_DIGITS.search(value):
        raise ValueError(problem)
    raw = value[1:] if value[:1] in ("b", "B") and value[1:].isdigit() else value
    try:
        return Version(raw)
    except InvalidVersion:
        raise ValueError(problem) from None


def engine_release(value: str) -> str:
    """The text of a release that `release_version` reads, unchanged; ValueError otherwise."""
    release_version(value)
    return value


# config fields: the same rules as pydantic types
Port = Annotated[int, Field(ge=1, le=PORT_MAX)]
Fraction = Annotated[float, Field(gt=0, le=1, allow_inf_nan=False)]
Share = Annotated[float, Field(ge=0, le=1, allow_inf_nan=False)]
Seconds = Annotated[float, Field(gt=0, le=MAX_SECONDS, allow_inf_nan=False)]
Count = Annotated[int, Field(ge=1, le=MAX_COUNT)]
Tokens = Annotated[int, Field(ge=1, le=MAX_TOKENS)]
BaseUrl = Annotated[str, AfterValidator(base_url)]
EnvVarName = Annotated[str, AfterValidator(env_var_name)]
EngineRelease = Annotated[str, AfterValidator(engine_release)]
