"""The client policy: who may send requests through the gateway, and whose credentials reach the engines.

- `passthrough` (default): the gateway checks nothing and adds nothing; a client's own credential headers go to
  the primary arm (never to the shadow). An engine that needs a key sees the client's.
- `keys`: a client must present a known key (`Authorization: Bearer <key>`, or `api-key` / `x-api-key`); keys
  come from environment variables (`keys_env`) or a file of SHA-256 digests (`key_file`, lines
  `<name> sha256:<hex>`, made by `switchover gateway hash-key`). Then the client's credentials are removed and
  the arm's own key (`api_key_env`) is sent instead. The key's name becomes the tenant when no tenant header is set.
- `open`: anyone; the arm's key is added to every request. An open authenticating proxy: chosen on purpose only,
  and announced in the log and `gateway state`.
"""

from __future__ import annotations

import hashlib
import os
import re
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from switchover.config.gateway import ClientsConfig
from switchover.errors import BadInput
from switchover.inputs import shown_env_name

_LINE = re.compile(r"^(?P<name>[A-Za-z0-9._:@\-]{1,64})\s+sha256:(?P<hex>[0-9a-fA-F]{64})$")


def digest(key: str) -> str:
    """The hex SHA-256 of a key (what the key file stores)."""
    return hashlib.sha256(key.encode("utf-8")).hexdigest()


def check_key_name(name: str) -> str:
    """A client name as the key file takes it, or BadInput."""
    if not re.fullmatch(r"[A-Za-z0-9._:@\-]{1,64}", name):
        raise BadInput(f"key name {name!r}: letters, digits and . _ : @ - only, at most 64")
    return name


def key_file_line(name: str, key: str) -> str:
    """One line of a key file."""
    check_key_name(name)
    if len(key) < 16:
        raise BadInput("a client key must be at least 16 characters")
    return f"{name} sha256:{digest(key)}"


def read_key_file(path: Path) -> dict[str, str]:
    """digest -> name from a key file; BadInput naming the file and line for anything else."""
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise BadInput(f"gateway.clients.key_file: cannot read {path}: {getattr(exc, 'strerror', None) or exc}",
                       hint="make one with `switchover gateway hash-key NAME < key.txt >> keys.txt`") from None
    out: dict[str, str] = {}
    for n, line in enumerate(text.splitlines(), 1):
        line = line.strip()
        if not line or line.startswith("#"):
            continue
        m = _LINE.match(line)
        if m is None:
            raise BadInput(f"gateway.clients.key_file {path}:{n}: expected '<name> sha256:<64 hex digits>'")
        out[m.group("hex").lower()] = m.group("name")
    if not out:
        raise BadInput(f"gateway.clients.key_file {path}: no keys in it")
    return out


@dataclass(frozen=True)
class Verdict:
    """Whether a request may pass, and who sent it (a key name, never the key)."""

    allowed: bool
    client: str | None = None
    reason: str = ""


class ClientPolicy:
    """The resolved `gateway.clients` section (keys read once per config load)."""

    def __init__(self, cfg: ClientsConfig, config_dir: Path | None = None) -> None:
        self.mode = cfg.mode
        self.credentials = frozenset(cfg.credential_headers)
        self._digests: dict[str, str] = {}
        if cfg.mode != "keys":
            return
        for name in cfg.keys_env:
            value = os.environ.get(name)
            if not value:
                raise BadInput(f"gateway.clients.keys_env: environment variable {shown_env_name(name)} is not set or "
                               "empty")
            self._digests[digest(value)] = name
        if cfg.key_file:
            path = Path(cfg.key_file).expanduser()
            if not path.is_absolute() and config_dir is not None:
                path = config_dir / path
            self._digests.update(read_key_file(path))

    @property
    def keys(self) -> int:
        return len(self._digests)

    @property
    def adds_engine_keys(self) -> bool:
        """The gateway sends the arm's own key (keys, open); in passthrough it sends the client's."""
        return self.mode != "passthrough"

    def presented(self, get: Callable[[str], str | None]) -> str | None:
        """The key a client presented: a Bearer token, else an api-key / x-api-key value."""
        auth = get("authorization")
        if auth:
            scheme, _, token = auth.strip().partition(" ")
            return token.strip() or None if scheme.lower() == "bearer" else None
        return get("x-api-key") or get("api-key") or None

    def check(self, get: Callable[[str], str | None]) -> Verdict:
        """Judge one request by its headers (`get(name)` returns the first value of a header)."""
        if self.mode != "keys":
            return Verdict(True)
        key = self.presented(get)
        if not key:
            return Verdict(False, reason="no client key (send Authorization: Bearer <key>)")
        # a lookup by digest: the time it takes says nothing about the stored keys (SHA-256 is not invertible)
        found = self._digests.get(digest(key))
        if found is None:
            return Verdict(False, reason="unknown client key")
        return Verdict(True, client=found)
