"""Durable rollout state: state.json written atomically, audit.jsonl appended one line per transition,
and a lock so two operators (or an operator and `rollout watch`) cannot interleave read-modify-write.

Every write in the state folder goes through switchover.safefile: a folder that is a symlink or another user's,
and a symlink, FIFO or hard link planted under a state file's name, are refused (BadInput, exit 2), never
written through."""

from __future__ import annotations

import contextlib
import fcntl
import getpass
import os
import socket
from collections.abc import Iterator
from pathlib import Path
from typing import TypeVar

import orjson
from pydantic import BaseModel, ValidationError

from switchover import atomicfile, safefile
from switchover.errors import BadInput
from switchover.rollout.stages import RolloutState, Transition
from switchover.textfile import read_bytes

STATE_FILE = "state.json"
AUDIT_FILE = "audit.jsonl"
LOCK_FILE = ".lock"
OLD_READY_FILE = "old_ready.jsonl"  # scheduled readiness checks of old while holding
BASELINE_FILE = "baseline.json"  # old's tails and output lengths from the window before 100 %
HOLDING_FILE = "holding.json"  # the latest holding report, for `check` and `report`
M = TypeVar("M", bound=BaseModel)
MAX_STATE_BYTES = 64 << 20  # state.json and the folder's other JSON files: a few KiB written by the rollout itself
MAX_AUDIT_BYTES = 256 << 20  # audit.jsonl: one short line per transition


def _read(path: Path, max_bytes: int, what: str) -> bytes | None:
    """A state-folder file's bytes, None when absent; bounded (a /dev/zero or a runaway file is BadInput)."""
    if not path.exists():
        return None
    return read_bytes(path, max_bytes=max_bytes, what=what)


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
    """Write a file the user named whole (temporary file in the same folder, fsync, rename, fsync the folder):
    switchover.atomicfile, which writes at the end of the user's own symlinks. State-folder files use safefile."""
    atomicfile.write_atomic(path, data)


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
        fd = safefile.open_file(self.folder, LOCK_FILE, os.O_RDWR | os.O_CREAT)
        with os.fdopen(fd, "a+b") as fh:
            fcntl.flock(fh.fileno(), fcntl.LOCK_EX)
            try:
                yield
            finally:
                fcntl.flock(fh.fileno(), fcntl.LOCK_UN)

    def load(self) -> RolloutState | None:
        raw = _read(self.state_path, MAX_STATE_BYTES, "rollout state file (JSON)")
        if raw is None:
            return None
        try:
            return RolloutState.model_validate_json(raw)
        except ValidationError as exc:
            raise BadInput(
                f"{self.state_path}: not a rollout state file ({exc.error_count()} problems)",
                hint="restore it from the audit log, or `switchover rollout reset`",
            ) from None

    def save(self, state: RolloutState) -> None:
        safefile.write_whole(self.folder, STATE_FILE, state.model_dump_json(indent=2).encode() + b"\n")

    def append(self, transition: Transition) -> None:
        """One JSON line per transition; O_APPEND keeps concurrent writers' lines whole."""
        self.append_line(AUDIT_FILE, transition)

    def audit(self) -> list[Transition]:
        raw = _read(self.audit_path, MAX_AUDIT_BYTES, "rollout audit log (JSONL)")
        if raw is None:
            return []
        lines = raw.splitlines()
        out = []
        for n, line in enumerate(lines, 1):
            if not line.strip():
                continue
            try:
                out.append(Transition.model_validate_json(line))
            except ValidationError:
                raise BadInput(f"{self.audit_path}: line {n} is not an audit record") from None
        return out

    def append_line(self, name: str, record: BaseModel) -> None:
        """One JSON line appended to `name` in the state folder (O_APPEND, fsynced)."""
        safefile.append(self.folder, name, orjson.dumps(record.model_dump(mode="json")) + b"\n")

    def read_lines(self, name: str, model: type[M]) -> list[M]:
        """Every readable line of `name` as `model` (a bad line is skipped: these logs never block a rollback)."""
        try:
            lines = (self.folder / name).read_bytes().splitlines()
        except FileNotFoundError:
            return []
        out = []
        for line in lines:
            try:
                out.append(model.model_validate_json(line))
            except ValidationError:
                continue
        return out

    def write_model(self, name: str, obj: BaseModel) -> None:
        """A JSON file in the state folder, replaced atomically."""
        safefile.write_whole(self.folder, name, obj.model_dump_json(indent=2).encode() + b"\n")

    def read_model(self, name: str, model: type[M]) -> M | None:
        """A JSON file of the state folder, or None when absent or unreadable."""
        raw = _read(self.folder / name, MAX_STATE_BYTES, f"rollout {name}")
        if raw is None:
            return None
        try:
            return model.model_validate_json(raw)
        except ValidationError:
            return None
