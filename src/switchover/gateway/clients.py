"""The client policy: who may send requests through the gateway, who a request counts as (its tenant, and the
client the kill switch counts), and whose credentials reach the engines.

- `passthrough` (default): the gateway checks nothing and adds nothing; a client's own credential headers go to
  the primary arm (never to the shadow). An engine that needs a key sees the client's.
- `keys`: a client must present a known key (`Authorization: Bearer <key>`, or `api-key` / `x-api-key`); keys
  come from environment variables (`keys_env`) or a file of SHA-256 digests (`key_file`, lines
  `<name> sha256:<hex>`, made by `switchover gateway hash-key`). Then the client's credentials are removed and
  the arm's own key (`api_key_env`) is sent instead. The key's name is the tenant: the tenant header is read only
  from keys listed in `tenant_header_keys` (an application server naming its own users, as `<key>/<tenant>`).
- `open`: anyone; the arm's key is added to every request. An open authenticating proxy: chosen on purpose only,
  and announced in the log and `gateway state`.
"""

from __future__ import annotations

import contextlib
import errno
import hashlib
import os
import re
import secrets
import stat
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from switchover.config.gateway import ClientsConfig
from switchover.errors import BadInput
from switchover.inputs import shown_env_name

_LINE = re.compile(r"^(?P<name>[A-Za-z0-9._:@\-]{1,64})\s+sha256:(?P<hex>[0-9a-fA-F]{64})$")
SEED_FILE = "tenant.seed"
SEED_BYTES = 32
_SEED = re.compile(rb"[0-9a-f]{64}\s*")


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
        raise BadInput(
            f"gateway.clients.key_file: cannot read {path}: {getattr(exc, 'strerror', None) or exc}",
            hint="make one with `switchover gateway hash-key NAME < key.txt >> keys.txt`",
        ) from None
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


def _seed_error(path: Path, why: str) -> BadInput:
    return BadInput(
        f"gateway.tenant_seed_file {path}: {why}",
        hint=f"move it away and restart: a new seed is made (tenants may change arm once), or restore "
        f"the deployment's own {SEED_FILE}",
    )


def deployment_seed(path: Path) -> bytes:
    """The deployment's secret tenant seed from `path` (64 hex digits), made there once (mode 0600) when missing.
    A symlink or anything not a regular file of a seed is refused (BadInput), never followed or overwritten."""
    if not os.path.lexists(path):
        _make_seed(path)
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
    except OSError as exc:
        why = "a symbolic link (refused)" if exc.errno == errno.ELOOP else f"cannot read it: {exc.strerror or exc}"
        raise _seed_error(path, why) from None
    with os.fdopen(fd, "rb") as fh:
        if not stat.S_ISREG(os.fstat(fh.fileno()).st_mode):
            raise _seed_error(path, "not a regular file")
        raw = fh.read(256)
    if not _SEED.fullmatch(raw):
        raise _seed_error(path, f"not a seed (expected {2 * SEED_BYTES} lower-case hex digits)")
    return bytes.fromhex(raw[: 2 * SEED_BYTES].decode())


def _make_seed(path: Path) -> None:
    """Write a new seed beside `path`, then link it into place: a reader never sees half a seed, and of two
    processes starting together the first link wins and both read the same seed."""
    tmp = path.with_name(f".{path.name}.{os.getpid()}.{secrets.token_hex(4)}")
    try:
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o600)
    except OSError as exc:
        raise _seed_error(path, f"cannot create it: {exc.strerror or exc}") from None
    try:
        with os.fdopen(fd, "wb") as fh:
            fh.write(secrets.token_bytes(SEED_BYTES).hex().encode() + b"\n")
            fh.flush()
            os.fsync(fh.fileno())
        try:
            os.link(tmp, path)  # never replaces what is there (a file, or a planted link)
        except FileExistsError:
            pass
        except OSError as exc:
            raise _seed_error(path, f"cannot create it: {exc.strerror or exc}") from None
    finally:
        with contextlib.suppress(OSError):
            os.unlink(tmp)


def bearer(value: str | None) -> str | None:
    """The token of an `Authorization: Bearer` value (else the value itself), or None when empty."""
    if value and value[:7].lower() == "bearer ":
        return value[7:].strip() or None
    return value or None


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
        self.tenant_namers = frozenset(cfg.tenant_header_keys)
        self._digests: dict[str, str] = {}
        if cfg.mode != "keys":
            return
        for name in cfg.keys_env:
            value = os.environ.get(name)
            if not value:
                raise BadInput(
                    f"gateway.clients.keys_env: environment variable {shown_env_name(name)} is not set or empty"
                )
            self._digests[digest(value)] = name
        if cfg.key_file:
            path = Path(cfg.key_file).expanduser()
            if not path.is_absolute() and config_dir is not None:
                path = config_dir / path
            self._digests.update(read_key_file(path))
        unknown = sorted(self.tenant_namers - set(self._digests.values()))
        if unknown:
            raise BadInput(
                f"gateway.clients.tenant_header_keys: {', '.join(unknown)} is not the name of a client key "
                f"(known: {', '.join(sorted(set(self._digests.values())))})"
            )

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

    def tenant_key(self, get: Callable[[str], str | None], verdict: Verdict, header: str) -> str | None:
        """Who the request is for, before hashing: in keys mode the key's name (with the tenant header's value only
        for a key in tenant_header_keys); otherwise the tenant header, else the bearer token; None: anonymous."""
        if self.mode == "keys" and verdict.client is not None:
            named = get(header) if verdict.client in self.tenant_namers else None
            return f"{verdict.client}/{named}" if named else verdict.client
        return get(header) or bearer(get("authorization"))

    def counted_as(self, verdict: Verdict) -> str | None:
        """The client the kill switch counts a request for: its key's name when several keys can get in; None (not
        capped) in passthrough / open mode, where no client is known, or with one key, whose client is everyone."""
        return verdict.client if self.mode == "keys" and self.keys > 1 else None
