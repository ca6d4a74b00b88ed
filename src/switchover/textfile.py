"""Text and JSON files a user hands over, read with limits: a size cap, UTF-8 only, nesting that cannot exhaust
the stack, and every failure a BadInput naming the file (never a UnicodeDecodeError or RecursionError)."""

from __future__ import annotations

import codecs
import json
import os
import select
import stat
import time
from pathlib import Path
from typing import Any

from switchover.errors import BadInput

MAX_BYTES = 1 << 20
STREAM_WAIT_S = 10.0  # a pipe or device (`<(cat f)`, a FIFO) must deliver its bytes within this, or it is refused


def _read_regular(fd: int, limit: int) -> bytes:
    chunks, got = [], 0
    while got < limit:
        chunk = os.read(fd, min(limit - got, 1 << 20))
        if not chunk:
            break
        chunks.append(chunk)
        got += len(chunk)
    return b"".join(chunks)


def _read_stream(fd: int, limit: int, p: Path, what: str) -> bytes:
    """A pipe, FIFO or device, read without blocking: a FIFO nobody writes to reads as empty, one that never
    ends stops at `limit`, one that stalls is refused after STREAM_WAIT_S."""
    chunks, got = [], 0
    deadline = time.monotonic() + STREAM_WAIT_S
    poller = select.poll()
    poller.register(fd, select.POLLIN)
    while got < limit:
        left = deadline - time.monotonic()
        if left <= 0 or not poller.poll(left * 1000):
            raise BadInput(f"{p}: no end of data within {STREAM_WAIT_S:g} s, not a {what}")
        try:
            chunk = os.read(fd, min(limit - got, 1 << 20))
        except BlockingIOError:
            continue
        if not chunk:
            break
        chunks.append(chunk)
        got += len(chunk)
    return b"".join(chunks)


def _open(p: Path, what: str) -> int:
    """A read descriptor that cannot block on a FIFO with no writer (O_NONBLOCK); BadInput naming `p` otherwise."""
    try:
        return os.open(p, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
    except FileNotFoundError:
        raise BadInput(f"{p}: no such file") from None
    except IsADirectoryError:
        raise BadInput(f"{p}: is a directory, expected a {what}") from None
    except OSError as exc:
        raise BadInput(f"{str(p)[:200]}: cannot read: {exc.strerror or exc}") from None


def read_bytes(path: str | Path, *, max_bytes: int = MAX_BYTES, what: str = "file") -> bytes:
    """A user's file as bytes, refused (BadInput) when missing, a directory or larger than `max_bytes`; never
    blocks on a FIFO or device (opened non-blocking, read with a deadline)."""
    p = Path(path)
    fd = _open(p, what)
    try:
        mode = os.fstat(fd).st_mode
        if stat.S_ISDIR(mode):
            raise BadInput(f"{p}: is a directory, expected a {what}")
        if stat.S_ISREG(mode):
            os.set_blocking(fd, True)
            raw = _read_regular(fd, max_bytes + 1)
        else:
            raw = _read_stream(fd, max_bytes + 1, p, what)
    except OSError as exc:
        raise BadInput(f"{p}: cannot read: {exc.strerror or exc}") from None
    finally:
        os.close(fd)
    if len(raw) > max_bytes:
        raise BadInput(f"{p}: larger than {max_bytes // 1024} KiB, not a {what}")
    return raw


def check_text_file(path: str | Path, *, max_bytes: int, what: str = "file") -> None:
    """Refuse (BadInput), without holding it in memory, a file a later reader opens again: it must be a regular
    file (a FIFO cannot be read twice), at most `max_bytes`, and UTF-8 throughout."""
    p = Path(path)
    fd = _open(p, what)
    if not stat.S_ISREG(os.fstat(fd).st_mode):
        os.close(fd)
        raise BadInput(f"{p}: not a regular file, expected a {what}")
    os.set_blocking(fd, True)
    with os.fdopen(fd, "rb") as fh:
        decoder, got = codecs.getincrementaldecoder("utf-8")(), 0
        try:
            while chunk := fh.read(1 << 20):
                got += len(chunk)
                if got > max_bytes:
                    raise BadInput(f"{p}: larger than {max_bytes >> 20} MiB, not a {what}")
                decoder.decode(chunk)
            decoder.decode(b"", final=True)
        except UnicodeDecodeError:
            raise BadInput(f"{p}: not UTF-8 text (near byte {got}), not a {what}") from None
        except OSError as exc:
            raise BadInput(f"{p}: cannot read: {exc.strerror or exc}") from None


def read_text(path: str | Path, *, max_bytes: int = MAX_BYTES, what: str = "file") -> str:
    """A user's text file, refused (BadInput) when missing, a directory, too large, or not UTF-8."""
    raw = read_bytes(path, max_bytes=max_bytes, what=what)
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise BadInput(f"{path}: not UTF-8 text (byte {exc.start}), not a {what}") from None


def parse_json(text: str, source: str) -> Any:
    """JSON text as data; BadInput with the line and column when malformed or nested absurdly deep."""
    try:
        return json.loads(text)
    except json.JSONDecodeError as exc:
        raise BadInput(f"{source}: malformed JSON at line {exc.lineno} column {exc.colno}: {exc.msg}") from None
    except RecursionError:
        raise BadInput(f"{source}: JSON nested too deeply") from None


def load_json(path: str | Path, *, max_bytes: int = MAX_BYTES, what: str = "JSON file") -> Any:
    """Read and parse a user's JSON file."""
    return parse_json(read_text(path, max_bytes=max_bytes, what=what), str(path))
