"""The gateway's files in its run directory, written so that a mistake fails closed.

- `gateway.lock`: held (flock) by the running gateway; a second gateway on the same run directory stops before
  it writes anything. It is taken only after the port is bound, so a gateway that cannot bind leaves every
  file as it was (the admin token above all).
- `admin.token`: a fresh random token per run, readable by its owner only.
- `killswitch.json`: the latch. A file that cannot be read (torn, not JSON, the wrong shape) means LATCHED, with
  an error that names the file: a broken latch must never send traffic back to the new arm unnoticed.
- `gateway.json`: where this gateway listens (url, pid, config), for `gateway state` / `gateway reset`.

Every one is opened through switchover.safefile: a symlink, FIFO or hard link planted in the run directory is
refused, never written through.
"""

from __future__ import annotations

import contextlib
import fcntl
import io
import logging
import os
import secrets
import time
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import urlsplit

import orjson

from switchover import safefile
from switchover.errors import BadInput, Unreachable

LOCK_FILE = "gateway.lock"
TOKEN_FILE = "admin.token"
LATCH_FILE = "killswitch.json"
ADDRESS_FILE = "gateway.json"
LOG_FILE = "gateway.log"
MAX_LATCH_BYTES = 1 << 20  # a few dozen bytes written by the gateway
MAX_SMALL_BYTES = 64 << 10  # gateway.json, admin.token, the pid in gateway.lock
_WILDCARDS = {"": "127.0.0.1", "0.0.0.0": "127.0.0.1", "::": "::1"}  # a gateway on every address, over loopback


class RunDirLock:
    """An exclusive lock on the run directory for the life of one gateway."""

    def __init__(self, run_dir: Path) -> None:
        self.path = run_dir / LOCK_FILE
        self._fd: int | None = None

    def acquire(self) -> None:
        """Take the lock or raise BadInput naming the process that holds it."""
        fd = safefile.open_file(self.path.parent, LOCK_FILE, os.O_RDWR | os.O_CREAT, 0o600)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            holder = os.pread(fd, 32, 0).decode("ascii", "replace").strip() or "another process"
            os.close(fd)
            raise BadInput(
                f"gateway.run_dir {self.path.parent} is in use by another gateway (pid {holder})",
                hint="stop it first, or give this gateway its own run_dir",
            ) from None
        os.ftruncate(fd, 0)
        os.pwrite(fd, str(os.getpid()).encode(), 0)
        self._fd = fd

    def release(self) -> None:
        if self._fd is not None:
            with contextlib.suppress(OSError):
                os.ftruncate(self._fd, 0)
            os.close(self._fd)
            self._fd = None


def write_admin_token(run_dir: Path) -> str:
    """A new admin token, written whole and owner-only (call this only while holding the run-dir lock)."""
    token = secrets.token_urlsafe(24)
    path = run_dir / TOKEN_FILE
    with contextlib.suppress(FileNotFoundError):
        path.unlink()  # a new file, so the owner-only mode applies (a planted symlink goes, its target stays)
    safefile.write_whole(run_dir, TOKEN_FILE, token, mode=0o600)
    return token


class LogFile(logging.FileHandler):
    """gateway.log, appended to through safefile (a planted symlink or hard link is refused, not written through)."""

    def __init__(self, run_dir: Path) -> None:
        self.run_dir = run_dir
        super().__init__(run_dir / LOG_FILE, encoding="utf-8")

    def _open(self) -> io.TextIOWrapper:
        return io.TextIOWrapper(
            safefile.open_append(self.run_dir, LOG_FILE),
            encoding="utf-8",
            errors="backslashreplace",
            write_through=True,
        )


def write_gateway_file(run_dir: Path, url: str, config_path: Path) -> Path:
    """gateway.json: this gateway's URL, pid and config, written whole (call this while holding the run-dir lock)."""
    return safefile.write_whole(
        run_dir,
        ADDRESS_FILE,
        orjson.dumps(
            {"url": url, "pid": os.getpid(), "config": str(config_path.resolve()), "ledger_dir": str(run_dir)}
        ),
    )


@dataclass(frozen=True)
class Latch:
    """The persisted kill-switch state; `error` says why the file could not be trusted (then latched)."""

    latched: bool
    reason: str | None = None
    error: str | None = None


class LatchFile:
    """Reads and writes killswitch.json."""

    def __init__(self, run_dir: Path) -> None:
        self.path = run_dir / LATCH_FILE

    def load(self) -> Latch:
        """The saved latch: absent file → not latched; unreadable or malformed → LATCHED with the reason."""
        try:
            raw = safefile.read_small(self.path.parent, LATCH_FILE, MAX_LATCH_BYTES)
        except safefile.UnsafeFile as exc:
            return self._broken(f"cannot be trusted: {exc.message}")
        except BadInput as exc:
            return self._broken(f"cannot be read: {exc.message}")
        except OSError as exc:
            return self._broken(f"cannot be read: {exc.strerror or exc}")
        if raw is None:
            return Latch(False)
        try:
            state = orjson.loads(raw)
        except orjson.JSONDecodeError:
            return self._broken("is not valid JSON (torn or edited)")
        if not isinstance(state, dict) or not isinstance(state.get("latched"), bool):
            return self._broken('does not hold {"latched": true|false, ...}')
        reason = state.get("reason")
        return Latch(state["latched"], reason if isinstance(reason, str) else None)

    def _broken(self, why: str) -> Latch:
        msg = f"kill-switch file {self.path} {why}"
        return Latch(True, f"{msg}; latched until `switchover gateway reset`", msg)

    def save(self, latched: bool, reason: str | None) -> None:
        """Write the latch whole and durably (safefile: unique temp file, fsync, rename, fsync the folder); an
        OSError (UnsafeFile among them) when it cannot be."""
        safefile.write_whole(
            self.path.parent, LATCH_FILE, orjson.dumps({"latched": latched, "reason": reason, "ts": time.time()})
        )


def lock_holder(run_dir: Path) -> int | None:
    """The pid of the gateway holding `run_dir`'s lock, None when none does. Read from /proc/locks (Linux), which
    takes no lock itself, so a gateway starting at that moment is never turned away; where it cannot be read, the
    pid written in gateway.lock when that process is alive."""
    try:
        ino = os.stat(run_dir / LOCK_FILE, follow_symlinks=False).st_ino
    except FileNotFoundError:
        return None
    try:
        with open("/proc/locks", encoding="ascii", errors="replace") as fh:
            table = fh.read()
    except OSError:
        return _written_pid_alive(run_dir)
    for line in table.splitlines():  # "1: FLOCK  ADVISORY  WRITE <pid> <maj>:<min>:<inode> 0 EOF"
        parts = line.split()
        if len(parts) >= 6 and parts[1] == "FLOCK" and parts[5].rsplit(":", 1)[-1] == str(ino) and parts[4].isdigit():
            return int(parts[4])
    return None


def _written_pid_alive(run_dir: Path) -> int | None:
    raw = safefile.read_small(run_dir, LOCK_FILE, MAX_SMALL_BYTES) or b""
    pid = int(raw) if raw.strip().isdigit() else 0
    if pid <= 0:
        return None
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return None
    except PermissionError:
        pass  # alive, another user's
    return pid


def admin_url(host: str, port: int, file_port: int | None) -> str:
    """The admin base URL from the gateway's own config (gateway.listen); gateway.json gives only the bound port, and
    only when the config asks for any port (0). Unreachable when the two disagree (a stale file)."""
    if port and file_port != port:
        raise Unreachable(
            f"gateway.json names port {file_port} but gateway.listen.port is {port}: the file is "
            "stale or from another config; the admin token was not sent",
            hint="restart the gateway with this config, or check --config",
        )
    if not port and file_port is None:
        raise Unreachable(
            "gateway.listen.port is 0 (any port) and gateway.json names no port: the admin token was not sent"
        )
    connect = _WILDCARDS.get(host, host)
    shown = f"[{connect}]" if ":" in connect else connect
    return f"http://{shown}:{port or file_port}"


def find_gateway(run_dir: Path, host: str, port: int) -> tuple[str, str]:
    """(admin base URL, admin token) of the gateway running on `run_dir` with listen address `host:port`;
    Unreachable, before anything is sent, when none is running or gateway.json does not belong to it."""
    none = "no running gateway found"
    hint = "start one with `switchover gateway --config ...`"
    raw = safefile.read_small(run_dir, ADDRESS_FILE, MAX_SMALL_BYTES)
    if raw is None:
        raise Unreachable(f"{none} (no {ADDRESS_FILE} in {run_dir})", hint=hint)
    try:
        info = orjson.loads(raw)
    except orjson.JSONDecodeError:
        info = None
    if not isinstance(info, dict) or not isinstance(info.get("url"), str) or not isinstance(info.get("pid"), int):
        raise Unreachable(f"{none}: {run_dir / ADDRESS_FILE} is not a gateway's address file", hint=hint)
    pid, holder = info["pid"], lock_holder(run_dir)
    if holder is None:
        raise Unreachable(
            f"{none}: {run_dir / ADDRESS_FILE} is stale (its gateway, pid {pid}, no longer holds "
            f"{run_dir}); the admin token was not sent",
            hint=hint,
        )
    if holder != pid:
        raise Unreachable(
            f"{run_dir / ADDRESS_FILE} is stale: it names pid {pid} but the gateway holding {run_dir} "
            f"is pid {holder}; the admin token was not sent"
        )
    try:
        file_port = urlsplit(info["url"]).port
    except ValueError:
        file_port = None
    url = admin_url(host, port, file_port)
    token = (safefile.read_small(run_dir, TOKEN_FILE, MAX_SMALL_BYTES) or b"").decode("ascii", "replace").strip()
    if not token:
        raise Unreachable(f"{none}: no admin token in {run_dir / TOKEN_FILE}", hint=hint)
    return url, token
