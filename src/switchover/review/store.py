"""Pairs and ratings in SQLite (one file in the gateway's run directory): the gateway inserts pairs, `switchover
review` reads them and stores ratings; both may run at once (WAL journal, short busy timeout). Ratings persist
across restarts of either; the latest rating of a pair counts, earlier ones are kept."""

from __future__ import annotations

import sqlite3
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import orjson

from switchover.atomicfile import atomic_path
from switchover.errors import BadInput
from switchover.review.models import RATINGS, Pair, RatingRow, ReviewSummary, summarize

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
_LATEST = ("SELECT r.* FROM ratings r JOIN (SELECT pair_id, MAX(id) AS id FROM ratings GROUP BY pair_id) l "
           "ON r.id = l.id")
NOTE_MAX = 2000


class ReviewStore:
    """One connection to the review database (create it with `ReviewStore.open`)."""

    def __init__(self, conn: sqlite3.Connection, path: Path) -> None:
        self.conn = conn
        self.path = path

    @classmethod
    def open(cls, path: Path, *, create: bool = True) -> ReviewStore:
        """Open (and, with `create`, make) the database; BadInput when it cannot be read as one."""
        if not create and not path.exists():
            raise BadInput(f"no review database at {path}",
                           hint="the gateway writes it once gateway.review.pairs_per_day > 0 and pairs are sampled")
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            conn = sqlite3.connect(path, timeout=2.0, isolation_level=None, check_same_thread=False)
            conn.execute("PRAGMA journal_mode=WAL")
            conn.execute("PRAGMA busy_timeout=2000")
            conn.executescript(SCHEMA)
        except sqlite3.DatabaseError as exc:
            raise BadInput(f"review database {path}: {exc}") from None
        except OSError as exc:
            raise BadInput(f"review database {path}: {exc.strerror or exc}") from None
        conn.row_factory = sqlite3.Row
        return cls(conn, path)

    def close(self) -> None:
        self.conn.close()

    # ---- pairs --------------------------------------------------------------------------------------
    def add_pair(self, pair: Pair) -> int:
        values = [getattr(pair, c) for c in _PAIR_COLS]
        cur = self.conn.execute(f"INSERT INTO pairs ({', '.join(_PAIR_COLS)}) VALUES "
                                f"({', '.join('?' * len(_PAIR_COLS))})", values)
        return int(cur.lastrowid or 0)

    def pair(self, pair_id: int) -> Pair | None:
        row = self.conn.execute("SELECT * FROM pairs WHERE id = ?", (pair_id,)).fetchone()
        return None if row is None else Pair(**dict(row))

    def next_unrated(self, task_type: str | None = None, after: int = 0) -> Pair | None:
        """The oldest pair without a rating (of one task type, after a pair id)."""
        sql = ("SELECT * FROM pairs p WHERE p.id > ? AND NOT EXISTS (SELECT 1 FROM ratings r WHERE r.pair_id = p.id)"
               + (" AND p.task_type = ?" if task_type else "") + " ORDER BY p.id LIMIT 1")
        row = self.conn.execute(sql, (after, task_type) if task_type else (after,)).fetchone()
        return None if row is None else Pair(**dict(row))

    def counts_today(self, day: str) -> dict[str, int]:
        """Pairs per task type sampled on a UTC day (the sampler's quota survives a restart)."""
        rows = self.conn.execute("SELECT task_type, COUNT(*) FROM pairs WHERE day = ? GROUP BY task_type", (day,))
        return {t: int(n) for t, n in rows}

    # ---- ratings ------------------------------------------------------------------------------------
    def rate(self, pair_id: int, rating: str, note: str = "", rater: str = "") -> RatingRow:
        """Store a rating; BadInput for an unknown pair or rating."""
        if rating not in RATINGS:
            raise BadInput(f"rating must be one of {', '.join(RATINGS)}, got {rating[:20]!r}")
        if self.pair(pair_id) is None:
            raise BadInput(f"no pair {pair_id}")
        row = RatingRow(pair_id=pair_id, rating=rating, note=note[:NOTE_MAX], rater=rater[:100],
                        ts=time.time())
        self.conn.execute("INSERT INTO ratings (pair_id, rating, note, rater, ts) VALUES (?, ?, ?, ?, ?)",
                          (row.pair_id, row.rating, row.note, row.rater, row.ts))
        return row

    def summary(self) -> ReviewSummary:
        """Per task type: pairs, the latest rating of each pair counted by kind, the worse-or-broken share."""
        pairs = dict(self.conn.execute("SELECT task_type, COUNT(*) FROM pairs GROUP BY task_type").fetchall())
        counts: dict[str, dict[str, int]] = {t: {} for t in pairs}
        for t, rating, n in self.conn.execute(
                f"SELECT p.task_type, l.rating, COUNT(*) FROM ({_LATEST}) l JOIN pairs p ON p.id = l.pair_id "
                "GROUP BY p.task_type, l.rating"):
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
        sql = (f"SELECT p.*, l.rating, l.note, l.rater, l.ts AS rated_ts FROM pairs p LEFT JOIN ({_LATEST}) l "
               "ON l.pair_id = p.id ORDER BY p.id")
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
