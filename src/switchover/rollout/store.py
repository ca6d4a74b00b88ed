"""Durable rollout state: state.json written atomically, audit.jsonl appended one line per transition,
and a lock so two operators (or an operator and `rollout watch`) cannot interleave read-modify-write."""

from __future__ import annotations

import contextlib
import fcntl
import getpass
import os
import socket
from collections.abc import Iterator
from pathlib import Path

import orjson
from pydantic import ValidationError

from switchover.errors import BadInput
from switchover.rollout.stages import RolloutState, Transition

STATE_FILE = "state.json"
AUDIT_FILE = "audit.jsonl"
LOCK_FILE = ".lock"


def actor() -> str:
    """user@host of whoever runs the command; SWITCHOVER_ACTOR overrides it (e.g. a CI job name)."""
    override = os.environ.get("SWITCHOVER_ACTOR")
    if override:
        return override
    try:
        user = getpass.getuser()
    except Exception:  # no passwd entry in some containers
        user = str(os.getuid())
    return f"{user}@{socket.gethostname()}"


def write_atomic(path: Path, data: bytes) -> None:
    """Write to a temporary file in the same folder, fsync, then rename over the target."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    try:
        with open(tmp, "wb") as fh:
            fh.write(data)
            fh.flush()
            os.fsync(fh.fileno())
        if path.exists():
            os.chmod(tmp, path.stat().st_mode & 0o7777)
        os.replace(tmp, path)
    finally:
        with contextlib.suppress(FileNotFoundError):
            tmp.unlink()
    with contextlib.suppress(OSError):  # make the rename itself durable
        dir_fd = os.open(path.parent, os.O_RDONLY)
        try:
            os.fsync(dir_fd)
        finally:
            os.close(dir_fd)


class RolloutStore:
    """The state folder of one rollout."""

    def __init__(self, folder: Path) -> None:
        self.folder = folder

    @property
    def state_path(self) -> Path:
        return self.folder / STATE_FILE

    @property
    def audit_path(self) -> Path:
        return self.folder / AUDIT_FILE

    @contextlib.contextmanager
    def locked(self) -> Iterator[None]:
        self.folder.mkdir(parents=True, exist_ok=True)
        with open(self.folder / LOCK_FILE, "a+b") as fh:
            fcntl.flock(fh.fileno(), fcntl.LOCK_EX)
            try:
                yield
            finally:
                fcntl.flock(fh.fileno(), fcntl.LOCK_UN)

    def load(self) -> RolloutState | None:
        try:
            raw = self.state_path.read_bytes()
        except FileNotFoundError:
            return None
        try:
            return RolloutState.model_validate_json(raw)
        except ValidationError as exc:
            raise BadInput(
                f"{self.state_path}: not a rollout state file ({exc.error_count()} problems)",
                hint="restore it from the audit log, or `switchover rollout reset`",
            ) from None

    def save(self, state: RolloutState) -> None:
        write_atomic(self.state_path, state.model_dump_json(indent=2).encode() + b"\n")

    def append(self, transition: Transition) -> None:
        """One JSON line per transition; O_APPEND keeps concurrent writers' lines whole."""
        self.folder.mkdir(parents=True, exist_ok=True)
        line = orjson.dumps(transition.model_dump(mode="json")) + b"\n"
        fd = os.open(self.audit_path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
        try:
            os.write(fd, line)
            os.fsync(fd)
        finally:
            os.close(fd)

    def audit(self) -> list[Transition]:
        try:
            lines = self.audit_path.read_bytes().splitlines()
        except FileNotFoundError:
            return []
        out = []
        for n, line in enumerate(lines, 1):
            if not line.strip():
                continue
            try:
                out.append(Transition.model_validate_json(line))
            except ValidationError:
                raise BadInput(f"{self.audit_path}: line {n} is not an audit record") from None
        return out
