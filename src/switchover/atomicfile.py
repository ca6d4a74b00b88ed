"""Files written whole: a unique temporary file in the target's folder, fsync, rename over the target, fsync the
folder. A reader sees the old file or the new one, never half of either, and two writers never share a temp name.

A symlink is followed (its file is replaced, the link stays); a stream or device (`-o /dev/stdout`, `/dev/null`, a
FIFO, a tty) is written in place, as a shell redirection would: renaming over it would replace the node itself.
"""

from __future__ import annotations

import contextlib
import errno
import os
import re
import secrets
import stat
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
    return (
        path.name.startswith(".")
        and f"{TEMP_SUFFIX}" in path.name
        and (path.name.endswith(TEMP_SUFFIX) or path.name.rsplit(TEMP_SUFFIX, 1)[1] == path.suffix)
    )


def _cannot(path: Path, exc: OSError) -> BadInput:
    return BadInput(f"cannot write {path}: {exc.strerror or exc}")


_STREAM_NAMES = re.compile(r"^/(?:dev/(?:stdout|stderr|fd/\d+)|proc/(?:self|thread-self|\d+)/fd/\d+)$")


def _prepare(path: Path) -> tuple[Path, bool]:
    """(where to write, whether in place): a stream or an existing non-regular file in place, anything else
    atomically at the end of its symlinks, its folder made."""
    try:
        if _STREAM_NAMES.match(os.path.abspath(path)):
            return path, True
        try:
            mode: int | None = os.stat(path).st_mode
        except FileNotFoundError:
            mode = None
        if mode is not None and stat.S_ISDIR(mode):
            raise BadInput(f"cannot write {path}: it is a directory", hint="give a file name")
        if mode is not None and not stat.S_ISREG(mode):
            return path, True
        real = Path(os.path.realpath(path)) if path.is_symlink() else path
        real.parent.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise _cannot(path, exc) from None
    return real, False


def _write_in_place(path: Path, raw: bytes) -> None:
    """Write to a stream or device the way `>` would; a FIFO with no reader is refused, not waited on."""
    try:
        fd = os.open(path, os.O_WRONLY | os.O_TRUNC | os.O_NONBLOCK | os.O_CLOEXEC)
    except OSError as exc:
        hint = "no process is reading the FIFO" if exc.errno == errno.ENXIO else None
        raise BadInput(f"cannot write {path}: {exc.strerror or exc}", hint=hint) from None
    try:
        os.set_blocking(fd, True)
        view = memoryview(raw)
        while view:
            view = view[os.write(fd, view) :]
    except OSError as exc:
        raise _cannot(path, exc) from None
    finally:
        os.close(fd)


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
    target, in_place = _prepare(Path(path))
    raw = data.encode("utf-8") if isinstance(data, str) else data
    if in_place:
        _write_in_place(target, raw)
        return Path(path)
    tmp = temp_path(target)
    try:
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, mode)
        try:
            view = memoryview(raw)
            while view:
                view = view[os.write(fd, view) :]
        finally:
            os.close(fd)
        _commit(tmp, target)
    except OSError as exc:
        with contextlib.suppress(OSError):
            tmp.unlink()
        raise _cannot(Path(path), exc) from None
    return Path(path)


@contextlib.contextmanager
def atomic_path(path: str | Path, *, keep_suffix: bool = False) -> Iterator[Path]:
    """For writers that need a path (Parquet, archives, a converter run as a child): yields a temp path; on success
    it is fsynced and renamed over `path`, on any exception it is removed."""
    target, in_place = _prepare(Path(path))
    if in_place:
        raise BadInput(f"cannot write {path}: not a regular file", hint="give a file name")
    tmp = temp_path(target, keep_suffix=keep_suffix)
    try:
        yield tmp
        _commit(tmp, target)
    except OSError as exc:
        with contextlib.suppress(OSError):
            tmp.unlink()
        raise _cannot(Path(path), exc) from None
    except BaseException:
        with contextlib.suppress(OSError):
            tmp.unlink()
        raise
