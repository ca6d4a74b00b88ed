"""Pairs and ratings in SQLite (one file in the gateway's run directory): the gateway inserts pairs, `switchover
review` reads them and stores ratings; both may run at once. Ratings persist across restarts of either; the latest
rating of a pair counts, earlier ones are kept.

Concurrency: every thread gets its own connection (a connection shared by the server's worker threads held read
snapshots open under another thread's write, and SQLite answers that with "database is locked" at once, busy
timeout or not); writes are BEGIN IMMEDIATE transactions (the busy timeout applies to them) retried until
WRITE_DEADLINE_S; WAL journal, so readers never wait for the writer.

Files: the database is created by switchover (O_CREAT|O_EXCL|O_NOFOLLOW, owner-only) and opened only when it and
its -wal/-shm/-journal companions are regular files of the current user's in a folder that is (safefile)."""

from __future__ import annotations

import contextlib
import os
import sqlite3
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any, TypeVar

import orjson

from switchover import safefile
from switchover.atomicfile import atomic_path
from switchover.errors import BadInput
from switchover.evidence.review import RATINGS, Pair, RatingRow, ReviewSummary, summarize

SCHEMA = """
CREATE TABLE IF NOT EXISTS pairs (
  id INTEGER PRIMARY KEY AUTOINCREMENT, ts REAL NOT NULL, day TEXT NOT NULL, task_type TEXT NOT NULL,
  request_id TEXT NOT NULL, path TEXT NOT NULL, model TEXT, prompt TEXT NOT NULL, old_answer TEXT NOT NULL,
  new_answer TEXT NOT NULL, old_status INTEGER, new_status INTEGER, old_error TEXT, new_error TEXT,
  old_finish_reason TEXT, new_finish_reason TEXT);
CREATE INDEX IF NOT EXISTS pairs_type ON pairs(task_type);
CREATE TABLE IF NOT EXISTS ratings (
  id INTEGER PRIMARY KEY AUTOINCREMENT, pair_id INTEGER NOT NULL REFERENCES pairs(id), rating TEXT NOT NULL
  CHECK (rating IN ('better', 'same', 'worse', 'broken')), note TEXT NOT NULL DEFAULT '', rater TEXT NOT NULL
  DEFAULT '', ts REAL NOT NULL);
CREATE INDEX IF NOT EXISTS ratings_pair ON ratings(pair_id);
"""
_PAIR_COLS = [f for f in Pair.model_fields if f != "id"]
_LATEST = (
    "SELECT r.* FROM ratings r JOIN (SELECT pair_id, MAX(id) AS id FROM ratings GROUP BY pair_id) l ON r.id = l.id"
)
NOTE_MAX = 2000
BUSY_TIMEOUT_MS = 2000  # one wait for the write lock inside SQLite
WRITE_DEADLINE_S = 10.0  # a write retried on "busy" / "locked" until this long after it started
COMPANIONS = ("-wal", "-shm", "-journal")  # files SQLite opens next to the database
T = TypeVar("T")


def _busy(exc: sqlite3.OperationalError) -> bool:
    code = getattr(exc, "sqlite_errorcode", None)
    if code is not None:
        return code & 0xFF in (sqlite3.SQLITE_BUSY, sqlite3.SQLITE_LOCKED)
    return "locked" in str(exc) or "busy" in str(exc)


def _check_files(path: Path, create: bool) -> tuple[int, int]:
    """Refuse a database (or companion) that is a symlink, not a regular file, another user's or hard-linked, in
    a folder that is unsafe; create a missing one owner-only when `create`. Returns its (device, inode)."""
    if not create and not os.path.lexists(path):
        raise BadInput(
            f"no review database at {path}",
            hint="the gateway writes it once gateway.review.pairs_per_day > 0 and pairs are sampled",
        )
    with safefile.folder_fd(path.parent) as dfd:
        for suffix in COMPANIONS:
            name = path.name + suffix
            if safefile.entry(dfd, name) is not None:
                os.close(safefile.open_at(dfd, path.parent, name, os.O_RDONLY))
        flags = os.O_RDWR | os.O_CREAT if create else os.O_RDONLY
        fd = safefile.open_at(dfd, path.parent, path.name, flags, 0o600)
        try:
            st = os.fstat(fd)
        finally:
            os.close(fd)
    return st.st_dev, st.st_ino


class ReviewStore:
    """The review database, with one connection per thread (create it with `ReviewStore.open`)."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self._local = threading.local()
        self._conns: list[sqlite3.Connection] = []
        self._lock = threading.Lock()
        self._writing = threading.Lock()  # one writer per process waits on SQLite's lock; the others wait here

    @classmethod
    def open(cls, path: Path, *, create: bool = True) -> ReviewStore:
        """Open (and, with `create`, make) the database; BadInput when it cannot be read as one or is unsafe."""
        path = Path(path)
        try:
            ident = _check_files(path, create)
            store = cls(path)
            conn = store.conn
            st = os.stat(path, follow_symlinks=False)
            if (st.st_dev, st.st_ino) != ident:  # replaced between the check and SQLite's open
                store.close()
                raise safefile.UnsafeFile(f"refusing to use {path}: it was replaced while being opened")
            store._retry(lambda: conn.executescript(SCHEMA))
        except sqlite3.DatabaseError as exc:
            raise BadInput(f"review database {path}: {exc}") from None
        except safefile.UnsafeFile:
            raise
        except OSError as exc:
            raise BadInput(f"review database {path}: {exc.strerror or exc}") from None
        return store

    @property
    def conn(self) -> sqlite3.Connection:
        """This thread's connection, opened on first use."""
        conn: sqlite3.Connection | None = getattr(self._local, "conn", None)
        if conn is None:
            conn = sqlite3.connect(
                self.path, timeout=BUSY_TIMEOUT_MS / 1000, isolation_level=None, check_same_thread=False
            )  # closed by close(), from whichever thread
            try:
                conn.execute(f"PRAGMA busy_timeout={BUSY_TIMEOUT_MS}")
                self._retry(lambda: conn.execute("PRAGMA journal_mode=WAL"))
            except BaseException:
                conn.close()
                raise
            conn.row_factory = sqlite3.Row
            with self._lock:
                self._conns.append(conn)
            self._local.conn = conn
        return conn

    def close(self) -> None:
        """Close every thread's connection."""
        with self._lock:
            conns, self._conns = self._conns, []
        for conn in conns:
            with contextlib.suppress(sqlite3.Error):
                conn.close()
        self._local = threading.local()

    def _retry(self, fn: Callable[[], T]) -> T:
        """`fn()`, again while SQLite says busy or locked, until WRITE_DEADLINE_S."""
        deadline = time.monotonic() + WRITE_DEADLINE_S
        pause = 0.005
        while True:
            try:
                return fn()
            except sqlite3.OperationalError as exc:
                if not _busy(exc) or time.monotonic() + pause > deadline:
                    raise
            time.sleep(pause)
            pause = min(pause * 2, 0.1)

    def _write(self, fn: Callable[[sqlite3.Connection], T]) -> T:
        """`fn(conn)` inside one BEGIN IMMEDIATE transaction, retried whole while the database is busy."""
        conn = self.conn

        def attempt() -> T:
            conn.execute("BEGIN IMMEDIATE")
            try:
                out = fn(conn)
                conn.execute("COMMIT")
            except BaseException:
                if conn.in_transaction:
                    conn.execute("ROLLBACK")
                raise
            return out

        with self._writing:
            return self._retry(attempt)

    def _read(self, sql: str, params: tuple[Any, ...] = ()) -> list[sqlite3.Row]:
        """Every row of one query (fetched whole, so no read stays open), retried while SQLite says busy."""
        conn = self.conn
        return self._retry(lambda: conn.execute(sql, params).fetchall())

    # ---- pairs --------------------------------------------------------------------------------------
    def add_pair(self, pair: Pair) -> int:
        values = [getattr(pair, c) for c in _PAIR_COLS]
        sql = f"INSERT INTO pairs ({', '.join(_PAIR_COLS)}) VALUES ({', '.join('?' * len(_PAIR_COLS))})"
        return self._write(lambda conn: int(conn.execute(sql, values).lastrowid or 0))

    def pair(self, pair_id: int) -> Pair | None:
        rows = self._read("SELECT * FROM pairs WHERE id = ?", (pair_id,))
        return Pair(**dict(rows[0])) if rows else None

    def next_unrated(self, task_type: str | None = None, after: int = 0) -> Pair | None:
        """The oldest pair without a rating (of one task type, after a pair id)."""
        sql = (
            "SELECT * FROM pairs p WHERE p.id > ? AND NOT EXISTS (SELECT 1 FROM ratings r WHERE r.pair_id = p.id)"
            + (" AND p.task_type = ?" if task_type else "")
            + " ORDER BY p.id LIMIT 1"
        )
        rows = self._read(sql, (after, task_type) if task_type else (after,))
        return Pair(**dict(rows[0])) if rows else None

    def counts_today(self, day: str) -> dict[str, int]:
        """Pairs per task type sampled on a UTC day (the sampler's quota survives a restart)."""
        rows = self._read("SELECT task_type, COUNT(*) FROM pairs WHERE day = ? GROUP BY task_type", (day,))
        return {t: int(n) for t, n in rows}

    # ---- ratings ------------------------------------------------------------------------------------
    def rate(self, pair_id: int, rating: str, note: str = "", rater: str = "") -> RatingRow:
        """Store a rating; BadInput for an unknown pair or rating."""
        if rating not in RATINGS:
            raise BadInput(f"rating must be one of {', '.join(RATINGS)}, got {rating[:20]!r}")
        row = RatingRow(pair_id=pair_id, rating=rating, note=note[:NOTE_MAX], rater=rater[:100], ts=time.time())

        def insert(conn: sqlite3.Connection) -> None:
            if conn.execute("SELECT 1 FROM pairs WHERE id = ?", (pair_id,)).fetchall() == []:
                raise BadInput(f"no pair {pair_id}")
            conn.execute(
                "INSERT INTO ratings (pair_id, rating, note, rater, ts) VALUES (?, ?, ?, ?, ?)",
                (row.pair_id, row.rating, row.note, row.rater, row.ts),
            )

        self._write(insert)
        return row

    def summary(self) -> ReviewSummary:
        """Per task type: pairs, the latest rating of each pair counted by kind, the worse-or-broken share."""
        pairs = {t: n for t, n in self._read("SELECT task_type, COUNT(*) FROM pairs GROUP BY task_type")}
        counts: dict[str, dict[str, int]] = {t: {} for t in pairs}
        for t, rating, n in self._read(
            f"SELECT p.task_type, l.rating, COUNT(*) FROM ({_LATEST}) l JOIN pairs p ON p.id = l.pair_id "
            "GROUP BY p.task_type, l.rating"
        ):
            counts.setdefault(t, {})[rating] = int(n)
        types = [summarize(t, int(pairs.get(t, 0)), c) for t, c in sorted(counts.items())]
        total: dict[str, int] = {}
        for c in counts.values():
            for k, v in c.items():
                total[k] = total.get(k, 0) + v
        return ReviewSummary(types=types, total=summarize("all", sum(int(n) for n in pairs.values()), total))

    # ---- export -------------------------------------------------------------------------------------
    def rows(self) -> Iterator[dict[str, Any]]:
        """Every pair with its latest rating (None when unrated), oldest first, streamed."""
        sql = (
            f"SELECT p.*, l.rating, l.note, l.rater, l.ts AS rated_ts FROM pairs p LEFT JOIN ({_LATEST}) l "
            "ON l.pair_id = p.id ORDER BY p.id"
        )
        for row in self.conn.execute(sql):
            yield dict(row)

    def export_jsonl(self, out: Path) -> int:
        """Every pair with its latest rating as JSON lines, written whole; returns the row count."""
        n = 0
        with atomic_path(out) as tmp, tmp.open("wb") as fh:
            for r in self.rows():
                fh.write(orjson.dumps(r) + b"\n")
                n += 1
        return n

    def export_parquet(self, out: Path, batch: int = 10_000) -> int:
        """The same rows as Parquet (row groups of `batch`), written whole; returns the row count."""
        import pyarrow as pa
        import pyarrow.parquet as pq

        n = 0
        with atomic_path(out) as tmp:
            writer: pq.ParquetWriter | None = None
            chunk: list[dict[str, Any]] = []
            try:
                for r in self.rows():
                    chunk.append(r)
                    if len(chunk) >= batch:
                        writer = _write_batch(writer, tmp, chunk, pa, pq)
                        n, chunk = n + len(chunk), []
                if chunk or writer is None:
                    writer = _write_batch(writer, tmp, chunk, pa, pq)
                    n += len(chunk)
            finally:
                if writer is not None:
                    writer.close()
        return n


_SCHEMA_TYPES = {"id": "int64", "ts": "float64", "old_status": "int64", "new_status": "int64", "rated_ts": "float64"}


def _arrow_schema(pa: Any) -> Any:
    cols = ["id", *_PAIR_COLS, "rating", "note", "rater", "rated_ts"]
    return pa.schema([(c, getattr(pa, _SCHEMA_TYPES.get(c, "string"))()) for c in cols])


def _write_batch(writer: Any, path: Path, rows: list[dict[str, Any]], pa: Any, pq: Any) -> Any:
    schema = _arrow_schema(pa)
    if writer is None:
        writer = pq.ParquetWriter(path, schema)
    writer.write_table(pa.Table.from_pylist(rows, schema=schema))
    return writer
