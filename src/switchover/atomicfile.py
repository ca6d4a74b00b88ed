"""Files written whole: a unique temporary file in the target's folder, fsync, rename over the target, fsync the
folder. A reader sees the old file or the new one, never half of either, and two writers never share a temp name.
"""

from __future__ import annotations

import contextlib
import os
import secrets
from collections.abc import Iterator
from pathlib import Path

from switchover.errors import BadInput

TEMP_SUFFIX = ".tmp"


def temp_path(path: Path, *, keep_suffix: bool = False) -> Path:
    """A fresh hidden temporary name next to `path` (pid + random, so concurrent writers never collide);
    `keep_suffix` ends it with the target's suffix, for tools that check it (`.gguf`)."""
    tail = path.suffix if keep_suffix else ""
    return path.with_name(f".{path.name}.{os.getpid()}.{secrets.token_hex(4)}{TEMP_SUFFIX}{tail}")


def is_temp(path: Path) -> bool:
    """Whether `path` is a temporary file left by an interrupted write (for cleanup and tests)."""
    return path.name.startswith(".") and f"{TEMP_SUFFIX}" in path.name and (
        path.name.endswith(TEMP_SUFFIX) or path.name.rsplit(TEMP_SUFFIX, 1)[1] == path.suffix)


def _cannot(path: Path, exc: OSError) -> BadInput:
    return BadInput(f"cannot write {path}: {exc.strerror or exc}")


def _prepare(path: Path) -> None:
    if path.is_dir():
        raise BadInput(f"cannot write {path}: it is a directory", hint="give a file name")
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise _cannot(path, exc) from None


def _sync_dir(folder: Path) -> None:
    with contextlib.suppress(OSError):  # makes the rename itself durable; not every filesystem allows it
        fd = os.open(folder, os.O_RDONLY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)


def _commit(tmp: Path, path: Path) -> None:
    """fsync the written `tmp` (fsync works on the file, whichever descriptor asks), keep a replaced file's
    permissions, rename `tmp` over `path` and make the rename durable."""
    fd = os.open(tmp, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)
    with contextlib.suppress(OSError):  # keep the permissions of a file being replaced
        os.chmod(tmp, path.stat().st_mode & 0o7777)
    os.replace(tmp, path)
    _sync_dir(path.parent)


def write_atomic(path: str | Path, data: bytes | str, *, mode: int = 0o644) -> Path:
    """Write `data` (str as UTF-8) to `path` whole; BadInput naming the path when it cannot be written.

    `mode` applies to a new file (0o600 for secrets); an existing file keeps its permissions.
    """
    target = Path(path)
    _prepare(target)
    raw = data.encode("utf-8") if isinstance(data, str) else data
    tmp = temp_path(target)
    try:
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, mode)
        try:
            view = memoryview(raw)
            while view:
                view = view[os.write(fd, view):]
        finally:
            os.close(fd)
        _commit(tmp, target)
    except OSError as exc:
        with contextlib.suppress(OSError):
            tmp.unlink()
        raise _cannot(target, exc) from None
    return target


@contextlib.contextmanager
def atomic_path(path: str | Path, *, keep_suffix: bool = False) -> Iterator[Path]:
    """For writers that need a path (Parquet, archives, a converter run as a child): yields a temp path; on success
    it is fsynced and renamed over `path`, on any exception it is removed."""
    target = Path(path)
    _prepare(target)
    tmp = temp_path(target, keep_suffix=keep_suffix)
    try:
        yield tmp
        _commit(tmp, target)
    except OSError as exc:
        with contextlib.suppress(OSError):
            tmp.unlink()
        raise _cannot(target, exc) from None
    except BaseException:
        with contextlib.suppress(OSError):
            tmp.unlink()
        raise
