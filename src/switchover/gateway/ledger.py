"""The ledger: request rows and shadow rows as JSONL in the gateway's run directory, rotated by size.

Files are `<run_dir>/ledger-00000.jsonl`, `ledger-00001.jsonl`, …; the highest number is the one being
written. A restart continues with the next number, so nothing is overwritten. Rows are buffered and flushed
at least every `flush_interval_s` (the gateway uses 0.1 s), so a reader (the rollout gates) sees a row at
most that long after it was written. A request row is written when the client's response ends; the result
of its mirror (if any) is a separate shadow row written when the mirror ends.

Readers never stop at a bad line: they skip it and count it in `LedgerSkips` (a torn last line of the newest
file is counted apart: it is normal while the gateway writes).

Retention (`keep_files`) deletes the oldest files; each deletion appends a line to `ledger-retired.jsonl` (the
file, its rows and their time range), so a reader can say how many rows of the window it reads are gone.

Both are opened through switchover.safefile: a symlink, FIFO or hard link planted under a ledger name is refused
(an OSError the gateway counts in ledger_errors), never appended to; a run directory that is a symlink or another
user's is refused when the ledger is made.
"""

from __future__ import annotations

import logging
import os
import re
import stat
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any

import orjson
from pydantic import BaseModel, ValidationError

from switchover import safefile
from switchover.ledger_record import LedgerRecord, LedgerRow, ShadowRecord

log = logging.getLogger("switchover.gateway")
_NAME = re.compile(r"^ledger-(\d{5,})\.jsonl$")
MAX_EXAMPLES = 3
RETIRED = "ledger-retired.jsonl"  # one line per file deleted by retention (not a ledger file: _NAME does not match)
MAX_RETIRED_BYTES = 16 << 20  # the newest ~100k deletions are read (6 TB of ledger at 64 MiB a file)
CLOCK_SLACK_S = 300.0
"""How far back the wall clock may have stepped between a row's arrival time and its write (NTP)."""


def ledger_files(run_dir: Path) -> list[Path]:
    """The ledger files in write order."""
    if not run_dir.is_dir():
        return []
    found = [(int(m.group(1)), p) for p in run_dir.iterdir() if (m := _NAME.match(p.name))]
    return [p for _, p in sorted(found)]


@dataclass
class LedgerSkips:
    """Lines a reader skipped: bad ones (not JSON, wrong shape) and torn tails (a line still being written)."""

    bad_lines: int = 0
    torn_tail: int = 0
    examples: list[str] = field(default_factory=list)  # "file:line: reason", at most MAX_EXAMPLES
    retired_files: int = 0  # files that retention deleted and that may have held rows of the span read (RETIRED)
    retired_rows: int = 0  # rows those files held, where counted
    retired_uncounted: int = 0  # of those files, the ones written before a restart: their rows were not counted

    def bad(self, where: str, reason: str) -> None:
        """Count one bad line; keep the first few as examples."""
        self.bad_lines += 1
        if len(self.examples) < MAX_EXAMPLES:
            self.examples.append(f"{where}: {reason}")

    def note(self) -> str | None:
        """A sentence for reports, or None when no line was bad and no row was deleted by retention."""
        said = []
        if self.bad_lines:
            were = "line could not be read and was" if self.bad_lines == 1 else "lines could not be read and were"
            said.append(f"{self.bad_lines} ledger {were} skipped ({'; '.join(self.examples)})")
        if self.retired_files:
            files = "file" if self.retired_files == 1 else "files"
            counted = self.retired_files - self.retired_uncounted
            parts = [f"up to {self.retired_rows} ledger rows"] if counted else []
            if self.retired_uncounted:
                parts.append(
                    f"the rows of {self.retired_uncounted} file(s) written before a gateway restart (not counted)"
                )
            said.append(
                f"{' and '.join(parts)} were deleted by ledger retention ({self.retired_files} {files}, "
                "gateway.ledger_keep_files) and are missing here"
            )
        return "; ".join(said) or None

    def count_retired(self, run_dir: Path, since: float | None = None) -> None:
        """Add the files retention deleted from `run_dir` that may have held a row that arrived at or after
        `since` (the file's latest arrival time, less CLOCK_SLACK_S; a file with no known time counts)."""
        for entry in retired(run_dir):
            last = entry.get("last_ts")
            if since is not None and isinstance(last, int | float) and last < since - CLOCK_SLACK_S:
                continue
            self.retired_files += 1
            rows = entry.get("rows")
            if isinstance(rows, int) and rows >= 0:
                self.retired_rows += rows
            else:
                self.retired_uncounted += 1


def retired(run_dir: Path) -> list[dict[str, Any]]:
    """The retention manifest's entries, oldest first: its newest MAX_RETIRED_BYTES (the entries a recent window
    can need); unreadable lines are passed over, and anything but a regular file is not read."""
    path = Path(run_dir) / RETIRED
    try:
        st = path.stat()
        if not stat.S_ISREG(st.st_mode):
            return []
        with path.open("rb") as fh:
            start = max(0, st.st_size - MAX_RETIRED_BYTES - 1)  # one byte before: is the first line whole?
            fh.seek(start)
            data = fh.read(MAX_RETIRED_BYTES + 1)
    except OSError:
        return []
    if start:  # drop through the first newline: a partial line, or the byte before a whole one
        data = data.partition(b"\n")[2]
    out = []
    for line in data.splitlines():
        try:
            obj = orjson.loads(line)
        except orjson.JSONDecodeError:
            continue
        if isinstance(obj, dict):
            out.append(obj)
    return out


def _reason(exc: ValidationError) -> str:
    err = exc.errors()[0]
    loc = ".".join(str(p) for p in err["loc"]) or "row"
    more = f" (+{exc.error_count() - 1} more)" if exc.error_count() > 1 else ""
    return f"{loc}: {err['msg']}{more}"


def parse_row(line: bytes) -> LedgerRow:
    """One ledger line as a request or shadow row (no `kind`: request); ValueError with a short reason."""
    try:
        obj = orjson.loads(line)
    except orjson.JSONDecodeError:
        raise ValueError("not JSON") from None
    if not isinstance(obj, dict):
        raise ValueError(f"not a JSON object ({type(obj).__name__})")
    kind = obj.get("kind", "request")
    model: type[LedgerRecord] | type[ShadowRecord]
    if kind == "request":
        model = LedgerRecord
    elif kind == "shadow":
        model = ShadowRecord
    else:
        raise ValueError(f"unknown kind {str(kind)[:40]!r}")
    try:
        return model.model_validate(obj)
    except ValidationError as exc:
        raise ValueError(f"not a {kind} row: {_reason(exc)}") from None


def read_ledger_files(files: Sequence[Path], skipped: LedgerSkips | None = None) -> Iterator[LedgerRow]:
    """Every readable row of `files` (in that order); bad lines and the newest file's torn tail are counted
    in `skipped` (complete once the iterator is exhausted)."""
    skips = skipped if skipped is not None else LedgerSkips()
    for i, path in enumerate(files):
        newest = i == len(files) - 1
        try:
            fh = path.open("rb")
        except FileNotFoundError:
            continue  # deleted by ledger retention between the listing and now: its rows are gone by policy
        with fh:
            for n, line in enumerate(fh, 1):
                if not line.endswith(b"\n") and newest:
                    skips.torn_tail += 1  # still being written
                    break
                if not line.strip():
                    continue
                try:
                    yield parse_row(line)
                except ValueError as exc:
                    torn = "" if line.endswith(b"\n") else " (a torn line: the writer stopped mid-line)"
                    skips.bad(f"{path.name}:{n}", f"{exc}{torn}")


def read_ledger(run_dir: str | Path, skipped: LedgerSkips | None = None) -> Iterator[LedgerRow]:
    """Every readable request and shadow row of a run directory, oldest file first (see LedgerSkips; the rows
    retention deleted are counted there too)."""
    if skipped is not None:
        skipped.count_retired(Path(run_dir))
    return read_ledger_files(ledger_files(Path(run_dir)), skipped)


def read_requests(run_dir: str | Path, skipped: LedgerSkips | None = None) -> Iterator[LedgerRecord]:
    """The request rows only (shadow rows are left out)."""
    return (r for r in read_ledger(run_dir, skipped) if isinstance(r, LedgerRecord))


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
        self._index = int(_NAME.match(files[-1].name).group(1)) + 1 if files else 0  # type: ignore[union-attr]
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
        """A typed row (request or shadow)."""
        row = record.model_dump(exclude_none=True)
        if isinstance(record, ShadowRecord):
            self.write_shadow(row)
        else:
            row.pop("kind", None)
            self.write_row(row)

    def write_row(self, row: dict[str, Any]) -> None:
        """A request row with LedgerRecord's fields (None values are left out; no `kind` means request)."""
        self._append(row)
        self.written += 1

    def write_shadow(self, row: dict[str, Any]) -> None:
        """A shadow row with ShadowRecord's fields; `shadow` a dict or a ShadowResult (`kind` is set to
        "shadow"; None values are left out, in `shadow` too)."""
        shadow = row.get("shadow")
        if isinstance(shadow, BaseModel):
            shadow = shadow.model_dump(exclude_none=True)
        elif isinstance(shadow, dict):
            shadow = {k: v for k, v in shadow.items() if v is not None}
        self._append({**row, "kind": "shadow", "shadow": shadow})
        self.shadows_written += 1

    def _append(self, row: dict[str, Any]) -> None:
        line = orjson.dumps({k: v for k, v in row.items() if v is not None}) + b"\n"
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
        span, ts = self._span, row.get("ts")
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
