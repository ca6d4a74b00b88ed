"""State files written without following what someone else planted: run directories and state folders hold
files that switchover creates, appends to and replaces for hours, so a symlink, FIFO, device or hard link left
there by another user must never redirect a write.

Rules (docs/gateway.md, "Files"): the folder itself is not a symlink, is a directory, is owned by the current
user and is not writable by every user; every file is opened relative to a descriptor of that folder with
O_NOFOLLOW, and refused unless it is a regular file owned by the current user with one link; a file replaced
whole is written to a fresh temporary name and renamed inside the folder (`dir_fd`), never through a path that
could have moved. A refusal is `UnsafeFile`: BadInput (exit 2, one line naming the file) and an OSError, so the
writers that log a failed write and go on (the ledger, the latch) keep doing so.
"""

from __future__ import annotations

import contextlib
import errno
import os
import secrets
import stat
from collections.abc import Iterator
from pathlib import Path
from typing import BinaryIO

from switchover.errors import BadInput

TEMP_SUFFIX = ".tmp"
_OPEN = os.O_NOFOLLOW | os.O_CLOEXEC | os.O_NOCTTY
_HINT = "remove it (it was not made by switchover) or give switchover a folder only you can write"


class UnsafeFile(BadInput, OSError):
    """A state file or folder that switchover will not write through (exit 2; an OSError for writers that go on)."""


def _refuse(path: Path, why: str, verb: str = "write") -> UnsafeFile:
    return UnsafeFile(f"refusing to {verb} {path}: {why}", hint=_HINT)


def _kind(mode: int) -> str:
    for test, name in (
        (stat.S_ISLNK, "a symbolic link"),
        (stat.S_ISDIR, "a directory"),
        (stat.S_ISFIFO, "a FIFO"),
        (stat.S_ISSOCK, "a socket"),
        (stat.S_ISCHR, "a device"),
        (stat.S_ISBLK, "a device"),
        (stat.S_ISREG, "a regular file"),
    ):
        if test(mode):
            return name
    return "not a regular file"


def _check_dir(path: Path, st: os.stat_result) -> None:
    if not stat.S_ISDIR(st.st_mode):
        raise _refuse(path, f"the folder is {_kind(st.st_mode)}")
    if st.st_uid != os.geteuid():
        raise _refuse(path, f"the folder is owned by uid {st.st_uid}, not by the current user ({os.geteuid()})")
    if st.st_mode & stat.S_IWOTH:
        raise _refuse(path, "the folder is writable by every user (chmod o-w it)")


def ensure_dir(path: Path) -> Path:
    """Make `path` (and its parents) when missing, then check it: not a symlink, a directory, the current user's,
    not writable by all. Parents are the user's choice and may be links; the last component may not."""
    try:
        path.mkdir(parents=True, exist_ok=True, mode=0o755)
    except FileExistsError:
        pass  # a symlink to nowhere or a file: said below
    except OSError as exc:
        raise BadInput(f"cannot make {path}: {exc.strerror or exc}") from None
    try:
        st = os.lstat(path)
    except OSError as exc:
        raise BadInput(f"cannot use {path}: {exc.strerror or exc}") from None
    _check_dir(path, st)
    return path


@contextlib.contextmanager
def folder_fd(path: Path) -> Iterator[int]:
    """A descriptor of the checked folder `path` (made when missing), for the *at() calls below."""
    ensure_dir(path)
    try:
        fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY | _OPEN)
    except OSError as exc:
        if exc.errno in (errno.ELOOP, errno.ENOTDIR):
            raise _refuse(path, "the folder was replaced by a symbolic link or a file") from None
        raise BadInput(f"cannot use {path}: {exc.strerror or exc}") from None
    try:
        _check_dir(path, os.fstat(fd))
        yield fd
    finally:
        os.close(fd)


def _check_file(path: Path, st: os.stat_result) -> None:
    if not stat.S_ISREG(st.st_mode):
        raise _refuse(path, f"it is {_kind(st.st_mode)}")
    if st.st_uid != os.geteuid():
        raise _refuse(path, f"it is owned by uid {st.st_uid}, not by the current user ({os.geteuid()})")
    if st.st_nlink > 1:
        raise _refuse(path, f"it has {st.st_nlink} hard links (another name for the same file)")


def open_at(dfd: int, folder: Path, name: str, flags: int, mode: int = 0o644) -> int:
    """Open `name` in the folder `dfd` without following a symlink, blocking on a FIFO or taking a tty; the file
    must be a regular one of the current user's with one link (UnsafeFile otherwise)."""
    path = folder / name
    try:
        fd = os.open(name, flags | _OPEN | os.O_NONBLOCK, mode, dir_fd=dfd)
    except OSError as exc:
        if exc.errno == errno.ELOOP:
            raise _refuse(path, "it is a symbolic link") from None
        if exc.errno == errno.ENXIO:  # a FIFO with no reader, or a socket
            raise _refuse(path, "it is not a regular file") from None
        raise
    try:
        _check_file(path, os.fstat(fd))
        os.set_blocking(fd, True)
    except BaseException:
        os.close(fd)
        raise
    return fd


def open_file(folder: Path, name: str, flags: int, mode: int = 0o644) -> int:
    """`open_at` in the checked folder `folder` (made when missing)."""
    with folder_fd(folder) as dfd:
        return open_at(dfd, folder, name, flags, mode)


def open_append(folder: Path, name: str, *, buffering: int = -1, mode: int = 0o644) -> BinaryIO:
    """`name` in `folder` opened for appending (created when missing), as a binary file object."""
    fd = open_file(folder, name, os.O_WRONLY | os.O_APPEND | os.O_CREAT, mode)
    return os.fdopen(fd, "ab", buffering=buffering)


def _write_all(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view) :]


def append(folder: Path, name: str, data: bytes, *, fsync: bool = True) -> None:
    """Append `data` to `name` in `folder` in one write (O_APPEND keeps concurrent writers' lines whole)."""
    fd = open_file(folder, name, os.O_WRONLY | os.O_APPEND | os.O_CREAT)
    try:
        _write_all(fd, data)
        if fsync:
            os.fsync(fd)
    finally:
        os.close(fd)


def entry(dfd: int, name: str) -> os.stat_result | None:
    """The folder entry `name` itself (a symlink is not followed), None when absent."""
    try:
        return os.stat(name, dir_fd=dfd, follow_symlinks=False)
    except FileNotFoundError:
        return None


def write_whole(folder: Path, name: str, data: bytes | str, *, mode: int = 0o644) -> Path:
    """Replace `name` in `folder` whole: a fresh temporary file (O_EXCL, O_NOFOLLOW), fsync, rename inside the
    folder, fsync the folder. An existing entry must be a regular file (it keeps its permissions); a symlink or
    anything else there is refused and left as it is."""
    raw = data.encode("utf-8") if isinstance(data, str) else data
    path = folder / name
    with folder_fd(folder) as dfd:
        old = entry(dfd, name)
        if old is not None and not stat.S_ISREG(old.st_mode):
            raise _refuse(path, f"it is {_kind(old.st_mode)}")
        tmp = f".{name}.{os.getpid()}.{secrets.token_hex(4)}{TEMP_SUFFIX}"
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | _OPEN, mode, dir_fd=dfd)
        try:
            try:
                _write_all(fd, raw)
                if old is not None:
                    os.fchmod(fd, old.st_mode & 0o7777)
                os.fsync(fd)
            finally:
                os.close(fd)
            os.replace(tmp, name, src_dir_fd=dfd, dst_dir_fd=dfd)
        except BaseException:
            with contextlib.suppress(OSError):
                os.unlink(tmp, dir_fd=dfd)
            raise
        with contextlib.suppress(OSError):  # makes the rename durable; not every filesystem allows it
            os.fsync(dfd)
    return path


def read_small(folder: Path, name: str, max_bytes: int) -> bytes | None:
    """The bytes of `name` in `folder`, None when absent; only a regular file is read (a symlink, a FIFO or a
    device is UnsafeFile), and one past `max_bytes` is BadInput: state files are small."""
    path = folder / name
    try:
        fd = os.open(path, os.O_RDONLY | _OPEN | os.O_NONBLOCK)
    except FileNotFoundError:
        return None
    except OSError as exc:
        if exc.errno == errno.ELOOP:
            raise _refuse(path, "it is a symbolic link", "read") from None
        raise
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            raise _refuse(path, f"it is {_kind(st.st_mode)}", "read")
        if st.st_size > max_bytes:
            raise BadInput(f"{path} is {st.st_size} bytes; a state file this big was not written by switchover")
        chunks, size = [], 0
        while size <= max_bytes and (chunk := os.read(fd, max_bytes + 1 - size)):
            chunks.append(chunk)
            size += len(chunk)
    finally:
        os.close(fd)
    if size > max_bytes:
        raise BadInput(f"{path} grew past {max_bytes} bytes while read")
    return b"".join(chunks)
