"""The request ledger: one LedgerRecord per request as JSONL in the gateway's run directory, rotated by size.

Files are `<run_dir>/ledger-00000.jsonl`, `ledger-00001.jsonl`, …; the highest number is the one being
written. A restart continues with the next number, so nothing is overwritten. Rows are buffered and flushed
at least every `flush_interval_s` (the gateway uses 0.1 s), so a reader (the rollout gates) sees a row at
most that long after its request ended; a torn last line of a file being appended to is skipped by
`read_ledger`.
"""

from __future__ import annotations

import re
import time
from collections.abc import Iterator
from pathlib import Path
from typing import IO, Any

import orjson

from switchover.gateway.ledger_record import LedgerRecord

_NAME = re.compile(r"^ledger-(\d{5,})\.jsonl$")


def ledger_files(run_dir: Path) -> list[Path]:
    """The ledger files in write order."""
    if not run_dir.is_dir():
        return []
    found = [(int(m.group(1)), p) for p in run_dir.iterdir() if (m := _NAME.match(p.name))]
    return [p for _, p in sorted(found)]


def read_ledger(run_dir: str | Path) -> Iterator[LedgerRecord]:
    """Every complete record, oldest first."""
    for path in ledger_files(Path(run_dir)):
        with path.open("rb") as fh:
            for line in fh:
                if not line.endswith(b"\n"):
                    break  # a line still being written
                yield LedgerRecord.model_validate_json(line)


class Ledger:
    """Appends records; starts a new file past `rotate_bytes`. Rows are flushed to the file at most
    `flush_interval_s` after they are written (0: every row), and on flush() / close()."""

    def __init__(self, run_dir: Path, rotate_bytes: int = 64 << 20, flush_interval_s: float = 0.0) -> None:
        self.run_dir = run_dir
        self.rotate_bytes = rotate_bytes
        self.flush_interval_s = flush_interval_s
        self._last_flush = float("-inf")
        self._dirty = False
        run_dir.mkdir(parents=True, exist_ok=True)
        files = ledger_files(run_dir)
        self._index = int(_NAME.match(files[-1].name).group(1)) + 1 if files else 0  # type: ignore[union-attr]
        self._fh: IO[bytes] | None = None
        self._size = 0
        self.written = 0

    @property
    def path(self) -> Path:
        return self.run_dir / f"ledger-{self._index:05d}.jsonl"

    def _open(self) -> IO[bytes]:
        if self._fh is None:
            self._fh = self.path.open("ab", buffering=1 << 20)
            self._size = self._fh.tell()
        return self._fh

    def write(self, record: LedgerRecord) -> None:
        self.write_row(record.model_dump(exclude_none=True))

    def write_row(self, row: dict[str, Any]) -> None:
        """A row with LedgerRecord's fields (None values are left out, as `write` does)."""
        line = orjson.dumps({k: v for k, v in row.items() if v is not None}) + b"\n"
        if self._fh is not None and self._size + len(line) > self.rotate_bytes and self._size > 0:
            self._fh.close()
            self._fh = None
            self._index += 1
        fh = self._open()
        fh.write(line)
        self._size += len(line)
        self.written += 1
        self._dirty = True
        now = time.monotonic()
        if now - self._last_flush >= self.flush_interval_s:
            self.flush(now)

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
