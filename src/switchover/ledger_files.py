"""The gateway's ledger read back: request and shadow rows as JSONL in a run directory, the files in write order,
and the retention manifest. The writer is switchover/gateway/ledger.py; the readers (rollout's gates and compare,
check, the fault matrix) read through here, so none of them imports the gateway.

Files are `<run_dir>/ledger-00000.jsonl`, `ledger-00001.jsonl`, ...; the highest number is the one being written.
Readers never stop at a bad line: they skip it and count it in `LedgerSkips` (a torn last line of the newest file is
counted apart: it is normal while the gateway writes). Retention deletes the oldest files; each deletion is a line
of `ledger-retired.jsonl` (the file, its rows and their time range), so a reader can say how many rows of the window
it reads are gone.
"""

from __future__ import annotations

import os
import re
import stat
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, BinaryIO, NamedTuple

import orjson
from pydantic import ValidationError

from switchover.errors import BadInput
from switchover.ledger_record import LedgerRecord, LedgerRow, ShadowRecord

LEDGER_NAME = re.compile(r"^ledger-(\d{5,})\.jsonl$")
MAX_EXAMPLES = 3
RETIRED = "ledger-retired.jsonl"  # a line per file deleted by retention (not a ledger file: LEDGER_NAME does not match)
MAX_RETIRED_BYTES = 16 << 20  # the newest ~100k deletions are read (6 TB of ledger at 64 MiB a file)
CLOCK_SLACK_S = 300.0
"""How far back the wall clock may have stepped between a row's arrival time and its write (NTP)."""


def ledger_files(run_dir: Path) -> list[Path]:
    """The ledger files in write order."""
    if not run_dir.is_dir():
        return []
    found = [(int(m.group(1)), p) for p in run_dir.iterdir() if (m := LEDGER_NAME.match(p.name))]
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
    missing: str | None = None  # the run dir or file read does not exist yet: nothing recorded there (a state)
    not_files: list[str] = field(default_factory=list)  # "name (a FIFO)": ledger names in the run dir, not read

    def bad(self, where: str, reason: str) -> None:
        """Count one bad line; keep the first few as examples."""
        self.bad_lines += 1
        if len(self.examples) < MAX_EXAMPLES:
            self.examples.append(f"{where}: {reason}")

    def note(self) -> str | None:
        """A sentence for reports, or None when the ledger exists, no line was bad and no row was deleted by
        retention."""
        said = []
        if self.missing is not None:
            said.append(
                f"no ledger at {self.missing} yet: nothing recorded there (the gateway writes it once it serves "
                "a request: `switchover gateway -c FILE`)"
            )
        if self.not_files:
            said.append(f"not regular files, so not read: {', '.join(self.not_files)}")
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


class _NotRegular(OSError):
    """A ledger path that is not a regular file (a FIFO, a device, a socket): reading it could block or never end."""

    def __init__(self, kind: str) -> None:
        super().__init__(kind)
        self.kind = kind


def file_kind(mode: int) -> str:
    """What a non-regular file is, in words, from its st_mode."""
    kinds = {
        "a FIFO": stat.S_ISFIFO,
        "a character device": stat.S_ISCHR,
        "a block device": stat.S_ISBLK,
        "a socket": stat.S_ISSOCK,
        "a directory": stat.S_ISDIR,
    }
    return next((word for word, test in kinds.items() if test(mode)), "not a regular file")


def _open_regular(path: Path) -> BinaryIO:
    """`path` opened for reading only if it is a regular file: opened without blocking (a FIFO's open waits for a
    writer) and checked on the descriptor (no window between a check and the open); _NotRegular otherwise."""
    fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK)
    try:
        mode = os.fstat(fd).st_mode
        if not stat.S_ISREG(mode):
            raise _NotRegular(file_kind(mode))
        os.set_blocking(fd, True)
        return os.fdopen(fd, "rb")
    except BaseException:
        os.close(fd)
        raise


def read_ledger_files(files: Sequence[Path], skipped: LedgerSkips | None = None) -> Iterator[LedgerRow]:
    """Every readable row of `files` (in that order); bad lines and the newest file's torn tail are counted
    in `skipped` (complete once the iterator is exhausted)."""
    skips = skipped if skipped is not None else LedgerSkips()
    for i, path in enumerate(files):
        newest = i == len(files) - 1
        try:
            fh = _open_regular(path)
        except FileNotFoundError:
            continue  # deleted by ledger retention between the listing and now: its rows are gone by policy
        except _NotRegular as exc:
            skips.not_files.append(f"{path.name} ({exc.kind})")
            continue
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


# --- reading a run dir for a window (the rollout gates, compare, check) -----------------------------------


class LedgerRows(NamedTuple):
    """The rows a reader got, and the lines it skipped."""

    rows: list[LedgerRow]
    skipped: LedgerSkips


def ledger_paths(path: Path, skipped: LedgerSkips | None = None) -> list[Path]:
    """The ledger files of a gateway run dir (or one .jsonl file), in write order. A path that does not exist yet
    holds no rows: nothing was recorded (a gateway that has not served yet), a state the gates hold on, said in
    `skipped`'s note; a --ledger the user typed is checked where it is given (cli/rollout_cmd.py). A path that is
    there but is neither (a FIFO, a device: reading it could block or never end) is BadInput, and is not read."""
    if path.is_dir():
        return ledger_files(path) or sorted(path.glob("*.jsonl"))
    if path.is_file():
        return [path]
    try:
        mode = path.stat().st_mode
    except OSError:
        mode = None  # not there (or a dangling link): nothing recorded yet
    if mode is not None:
        raise BadInput(
            f"ledger {path}: {file_kind(mode)}, not a ledger file or run directory",
            hint="point it at the gateway's run_dir (ledger-NNNNN.jsonl files) or one ledger .jsonl file",
        )
    if skipped is not None:
        skipped.missing = str(path)
    return []


def stream_ledger_rows(
    path: Path, since: float | None = None, skipped: LedgerSkips | None = None
) -> Iterator[LedgerRow]:
    """Request and shadow rows at or after `since`, one at a time (memory flat in the ledger's length);
    unreadable lines are counted in `skipped` once the iterator is exhausted, and the rows of that span that ledger
    retention deleted at once."""
    files = ledger_paths(path, skipped)  # checked now, not at the first next()
    if skipped is not None and path.is_dir():
        skipped.count_retired(path, since)
    if since is not None:
        files = files_that_may_hold(files, since)
    return (r for r in read_ledger_files(files, skipped) if since is None or r.ts >= since)


def files_that_may_hold(files: Sequence[Path], since: float) -> list[Path]:
    """The ledger files that can hold a row that arrived at or after `since` (wall clock): a row is written
    after its request arrived, so a closed file last modified (well) before `since` holds none and is not read
    again on every gate tick (the rollout's CPU stays flat in the ledger's age). The newest file is always read."""
    keep = []
    for i, p in enumerate(files):
        if i == len(files) - 1:
            keep.append(p)
            continue
        try:
            mtime = p.stat().st_mtime
        except OSError:
            continue  # rotated away (retention) between the listing and now
        if mtime >= since - CLOCK_SLACK_S:
            keep.append(p)
    return keep


def read_ledger_rows(path: Path, since: float | None = None) -> LedgerRows:
    """Request and shadow rows at or after `since`, from a gateway run dir or one .jsonl file. Unreadable
    lines are skipped and counted, never fatal: a bad line must not block a rollback."""
    skipped = LedgerSkips()
    return LedgerRows(list(stream_ledger_rows(path, since, skipped)), skipped)
