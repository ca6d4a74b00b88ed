"""The ledger writer: request rows and shadow rows as JSONL in the gateway's run directory, rotated by size
(read back by switchover/ledger_files.py, which readers import instead of the gateway).

Files are `<run_dir>/ledger-00000.jsonl`, `ledger-00001.jsonl`, …; the highest number is the one being
written. A restart continues with the next number, so nothing is overwritten. Rows are buffered and flushed
at least every `flush_interval_s` (the gateway uses 0.1 s), so a reader (the rollout gates) sees a row at
most that long after it was written. A request row is written when the client's response ends; the result
of its mirror (if any) is a separate shadow row written when the mirror ends.

Retention (`keep_files`) deletes the oldest files; each deletion appends a line to `ledger-retired.jsonl` (the
file, its rows and their time range), so a reader can say how many rows of the window it reads are gone.

Both are opened through switchover.safefile: a symlink, FIFO or hard link planted under a ledger name is refused
(an OSError the gateway counts in ledger_errors), never appended to; a run directory that is a symlink or another
user's is refused when the ledger is made.
"""

from __future__ import annotations

import logging
import os
import time
from pathlib import Path
from typing import IO, Any

import orjson

from switchover import safefile
from switchover.ledger_files import LEDGER_NAME, RETIRED, ledger_files
from switchover.ledger_record import LedgerRecord, RequestRow, ShadowRecord, ShadowRow

log = logging.getLogger("switchover.gateway")


def _span_of(path: Path) -> list[Any]:
    """[rows, earliest ts, latest ts] of a file written before this process started: its rows are not counted
    (reading a 64 MiB file at a rotation would stall the gateway's event loop); its last write time bounds the
    arrival time of every row in it from above."""
    try:
        return [None, None, path.stat().st_mtime]
    except OSError:
        return [None, None, None]


class Ledger:
    """Appends rows; starts a new file past `rotate_bytes`, and then deletes the oldest files beyond
    `keep_files` (None: keeps every file). Rows are flushed to the file at most `flush_interval_s` after they are
    written (0: every row), and on flush() / close()."""

    def __init__(
        self, run_dir: Path, rotate_bytes: int = 64 << 20, flush_interval_s: float = 0.0, keep_files: int | None = None
    ) -> None:
        self.run_dir = run_dir
        self.rotate_bytes = rotate_bytes
        self.keep_files = keep_files
        self.files_deleted = 0
        self.flush_interval_s = flush_interval_s
        self._last_flush = float("-inf")
        self._dirty = False
        safefile.ensure_dir(run_dir)
        files = ledger_files(run_dir)
        self._index = int(LEDGER_NAME.match(files[-1].name).group(1)) + 1 if files else 0  # type: ignore[union-attr]
        self._fh: IO[bytes] | None = None
        self._size = 0
        self._span: list[Any] = [0, None, None]  # the open file's [rows, earliest ts, latest ts]
        self._spans: dict[str, list[Any]] = {}  # the same for closed files written here, kept while retention may run
        self.written = 0  # request rows
        self.shadows_written = 0  # shadow rows

    @property
    def path(self) -> Path:
        return self.run_dir / f"ledger-{self._index:05d}.jsonl"

    def _open(self) -> IO[bytes]:
        if self._fh is None:
            self._fh = safefile.open_append(self.run_dir, self.path.name, buffering=1 << 20)
            self._size = self._fh.seek(0, os.SEEK_END)
        return self._fh

    def write(self, record: LedgerRecord | ShadowRecord) -> None:
        """A validated row (request or shadow), as a reader's model holds it: its fields in schema order, None values
        left out (a request row without `kind`)."""
        if isinstance(record, ShadowRecord):
            self._append(_line(record.model_dump(exclude_none=True)), record.ts)
            self.shadows_written += 1
        else:
            self._append(_line(record.model_dump(exclude_none=True, exclude={"kind"})), record.ts)
            self.written += 1

    def write_row(self, row: RequestRow) -> None:
        """A request row as the gateway or the Envoy plane built it (ledger_record.RequestRow)."""
        self._append(row.to_json(), row.ts)
        self.written += 1

    def write_shadow(self, row: ShadowRow) -> None:
        """A shadow row as the gateway or the Envoy plane built it (ledger_record.ShadowRow)."""
        self._append(row.to_json(), row.ts)
        self.shadows_written += 1

    def _append(self, line: bytes, ts: Any) -> None:
        if self._fh is not None and self._size + len(line) > self.rotate_bytes and self._size > 0:
            self._fh.close()
            self._fh = None
            if self.keep_files is not None:
                self._spans[self.path.name] = self._span
            self._span = [0, None, None]
            self._index += 1
            self._open()  # the new file exists before the oldest go
            self._retain()
        fh = self._open()
        fh.write(line)
        self._size += len(line)
        span = self._span
        span[0] += 1
        if isinstance(ts, int | float):  # rows end (and are written) out of arrival order: keep the range
            if span[1] is None or ts < span[1]:
                span[1] = ts
            if span[2] is None or ts > span[2]:
                span[2] = ts
        self._dirty = True
        now = time.monotonic()
        if now - self._last_flush >= self.flush_interval_s:
            self.flush(now)

    def _retain(self) -> None:
        """Delete the oldest files beyond keep_files (the one being written is the newest, never deleted)."""
        if self.keep_files is None:
            return
        files = ledger_files(self.run_dir)
        for old in files[: max(0, len(files) - self.keep_files)]:
            span = self._spans.pop(old.name, None) or _span_of(old)
            try:
                old.unlink()
                self.files_deleted += 1
                self._record_retired(old.name, span)
                # said in gateway.log: a report over the run dir no longer sees these rows
                log.info(
                    "ledger retention: deleted %s, %s rows (keep_files %d)",
                    old.name,
                    "uncounted" if span[0] is None else span[0],
                    self.keep_files,
                )
            except FileNotFoundError:
                pass
            except OSError as exc:  # disk full of something else, permissions: keep writing, say why (at each rotation)
                log.warning("ledger retention: cannot delete %s: %s", old.name, exc)
                return

    def _record_retired(self, name: str, span: list[Any]) -> None:
        entry = {"file": name, "rows": span[0], "first_ts": span[1], "last_ts": span[2], "deleted_at": time.time()}
        try:
            fd = safefile.open_file(self.run_dir, RETIRED, os.O_RDWR | os.O_APPEND | os.O_CREAT)
            with os.fdopen(fd, "a+b") as fh:
                size = fh.seek(0, os.SEEK_END)
                torn = False
                if size:  # a crash mid-write left a line without its newline: keep the next entry off it
                    fh.seek(size - 1)
                    torn = fh.read(1) != b"\n"
                fh.write((b"\n" if torn else b"") + orjson.dumps(entry) + b"\n")  # "a" mode: always at the end
        except OSError as exc:  # the rows are gone either way; the log says how many
            log.warning("ledger retention: cannot record %s (%s rows) in %s: %s", name, span[0], RETIRED, exc)

    def flush(self, now: float | None = None) -> None:
        """Push buffered rows to the file (the gateway calls this on a timer)."""
        if self._fh is not None and self._dirty:
            self._fh.flush()
            self._dirty = False
        self._last_flush = time.monotonic() if now is None else now

    def close(self) -> None:
        if self._fh is not None:
            self._fh.close()
            self._fh = None


def _line(row: dict[str, Any]) -> bytes:
    return orjson.dumps({k: v for k, v in row.items() if v is not None}) + b"\n"


# ---- what the client sent of the sampling fields (a request row's `client`) ------------------------------------

SUFFIX_CHARS = 64  # the fixed ending hashed: long enough for "Answer in JSON, no markdown." and its like
_NUMBERS = ("temperature", "top_p", "presence_penalty", "frequency_penalty")
SAMPLING_FIELDS = frozenset(
    {
        *_NUMBERS,
        "top_k",
        "min_p",
        "repetition_penalty",
        "max_tokens",
        "max_completion_tokens",
        "seed",
        "stop",
        "response_format",
        "n",
        "logit_bias",
        "logprobs",
    }
)


def _number(v: Any) -> float | None:
    return float(v) if isinstance(v, int | float) and not isinstance(v, bool) else None


def _suffix_hash(text: str | None, key: bytes) -> str | None:
    if not text:
        return None
    import hashlib
    import hmac

    return hmac.new(key, text[-SUFFIX_CHARS:].encode("utf-8", "replace"), hashlib.sha256).hexdigest()[:16]


def _last_text(messages: Any, role: str) -> str | None:
    """The last SUFFIX_CHARS characters of the last message of `role` (text parts joined, read from the end so a
    long message is never copied whole); None when there is none."""
    if not isinstance(messages, list):
        return None
    for m in reversed(messages):
        if isinstance(m, dict) and m.get("role") == role:
            c = m.get("content")
            if isinstance(c, str):
                return c[-SUFFIX_CHARS:]
            if not isinstance(c, list):
                return None
            tail = ""
            for p in reversed(c):
                if isinstance(p, dict) and isinstance(p.get("text"), str):
                    tail = p["text"][-SUFFIX_CHARS:] + tail
                    if len(tail) >= SUFFIX_CHARS:
                        break
            return tail[-SUFFIX_CHARS:]
    return None


def client_sampling(obj: dict[str, Any], key: bytes) -> dict[str, Any]:
    """The `client` field of a request row from the request already parsed: which sampling fields were set and
    their values (no prompt text; the last system and user messages' endings as keyed hashes)."""
    out: dict[str, Any] = {"set": sorted(SAMPLING_FIELDS.intersection(obj))}
    for name in _NUMBERS:
        out[name] = _number(obj.get(name))
    top_k = obj.get("top_k")
    out["top_k"] = top_k if isinstance(top_k, int) and not isinstance(top_k, bool) else None
    limit = obj.get("max_completion_tokens", obj.get("max_tokens"))
    out["max_tokens"] = limit if isinstance(limit, int) and not isinstance(limit, bool) else None
    out["seed"] = obj.get("seed") is not None
    fmt = obj.get("response_format")
    out["response_format"] = str(fmt.get("type"))[:40] if isinstance(fmt, dict) and fmt.get("type") else None
    stop = obj.get("stop")
    out["stop"] = 1 if isinstance(stop, str) else len(stop) if isinstance(stop, list) else None
    prompt = obj.get("prompt")
    user = prompt if isinstance(prompt, str) else _last_text(obj.get("messages"), "user")
    out["system_suffix"] = _suffix_hash(_last_text(obj.get("messages"), "system"), key)
    out["user_suffix"] = _suffix_hash(user, key)
    return out
