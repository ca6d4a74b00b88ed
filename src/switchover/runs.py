"""Run directories: `runs/<timestamp>-<name>/` with the resolved config, endpoint fingerprints, typed results
as JSON and raw per-request rows as Parquet, so any report or metric can be rebuilt later.

Layout (every measuring command uses the same one; file names are the caller's choice):
    runs/20261129T112233Z-bench/
        config.json         the resolved configuration the command ran with
        endpoints.json      a fingerprint per endpoint (engine, version, model, flags where known)
        <result>.json       typed results (pydantic models dumped as JSON)
        <records>.parquet   raw per-request rows (pyarrow), queryable with DuckDB via `RunDir.query`
"""

from __future__ import annotations

import os
import re
import time
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any, TypeVar, overload

import orjson
import pyarrow as pa
import pyarrow.parquet as pq
from pydantic import BaseModel, ValidationError

from switchover.atomicfile import atomic_path, temp_path, write_atomic
from switchover.errors import BadInput
from switchover.redaction import redact, redact_data
from switchover.textfile import read_bytes

M = TypeVar("M", bound=BaseModel)

_NAME = re.compile(r"[^A-Za-z0-9._-]+")
MAX_JSON_BYTES = 64 << 20  # a run's JSON results (a week-long soak's summary is a few MiB); bounds what `report` reads


class UnreadableRunFile(BadInput, ValueError):
    """A run-directory JSON file that is malformed or not the expected model: BadInput (exit 2) for a command, and
    a ValueError for callers that judge each part file on its own (check's evidence marks that part unreadable)."""


def _safe(name: str, what: str) -> str:
    if not name or "/" in name or name.startswith("."):
        raise BadInput(f"{what} must be a plain file name, got {name!r}")
    return name


def _with_ext(name: str, ext: str) -> str:
    return name if name.endswith(ext) else name + ext


def _clean_rows(rows: Iterable[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """Rows with secrets masked in their text values (error messages may quote a URL or a header)."""
    return [{k: redact(v) if isinstance(v, str) else v for k, v in row.items()} for row in rows]


class RecordWriter:
    """Appends rows to one Parquet file, a row group per `append`, so an interrupted run keeps its rows; the file
    is written under a unique temporary name and renamed into place whole on `close`."""

    def __init__(
        self,
        path: Path,
        schema: pa.Schema,
        *,
        redacted: bool = True,
        statistics: bool | list[str] = True,
        dictionary: bool | list[str] = True,
    ) -> None:
        self.path = path
        self.schema = schema
        self.redacted = redacted  # False: the caller masks its free-text columns itself (bench rows: per failure)
        self._tmp = temp_path(path)
        # statistics: the columns whose min/max go into every row group's metadata, which the writer holds until it
        # closes (for list and long-text columns that is ~27 KB a row group: name the scalar columns for long runs)
        # dictionary: the columns dictionary-encoded (repeated values); for unique ones such as timestamps it only
        # costs time and bytes
        self._writer: pq.ParquetWriter | None = pq.ParquetWriter(
            self._tmp, schema, write_statistics=statistics, use_dictionary=dictionary
        )
        self.rows = 0

    def append(self, rows: list[Mapping[str, Any]]) -> None:
        if not rows:
            return
        if self._writer is None:
            raise RuntimeError(f"{self.path} is closed")
        clean = _clean_rows(rows) if self.redacted else list(rows)
        self._writer.write_table(pa.Table.from_pylist(clean, schema=self.schema))
        self.rows += len(rows)

    def append_table(self, table: pa.Table) -> None:
        """One row group from columns already built (the bench's batches); only a writer whose caller masks its own
        free text (redacted=False) takes a table, since a table is written as it is."""
        if self.redacted:
            raise ValueError(f"{self.path}: a redacting writer takes rows (append), not a prepared table")
        if self._writer is None:
            raise RuntimeError(f"{self.path} is closed")
        self._writer.write_table(table)
        self.rows += table.num_rows

    def close(self) -> None:
        """Finish the file (also after an interruption); an empty file still gets the schema."""
        if self._writer is None:
            return
        self._writer.close()
        self._writer = None
        with atomic_path(self.path) as tmp:
            os.replace(self._tmp, tmp)

    def __enter__(self) -> RecordWriter:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def prepare_folder(base: str | Path) -> Path:
    """Make the runs folder (and its parents); BadInput naming it when that is impossible. Commands call it
    before any work, so a bad --runs-dir is refused before an engine is contacted."""
    root = Path(base)
    try:
        root.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise BadInput(f"cannot create the runs folder {root}: {exc.strerror or exc}") from None
    return root


class RunDir:
    """One run directory; create it with `RunDir.create`, read it back with `RunDir.open`."""

    def __init__(self, path: Path) -> None:
        self.path = path

    def __repr__(self) -> str:
        return f"RunDir({str(self.path)!r})"

    @property
    def name(self) -> str:
        return self.path.name

    @classmethod
    def create(cls, base: str | Path, name: str, *, now: float | None = None) -> RunDir:
        """Make `base/<UTC timestamp>-<name>/`; a numeric suffix keeps two runs in one second apart."""
        stamp = time.strftime("%Y%m%dT%H%M%SZ", time.gmtime(time.time() if now is None else now))
        slug = (_NAME.sub("-", name).strip("-") or "run")[:80]
        root = prepare_folder(base)
        for i in range(1000):
            path = root / (f"{stamp}-{slug}" if i == 0 else f"{stamp}-{slug}-{i}")
            try:
                path.mkdir()
            except FileExistsError:
                continue
            return cls(path)
        raise BadInput(f"cannot find a free run-directory name under {root}")

    @classmethod
    def open(cls, path: str | Path) -> RunDir:
        p = Path(path)
        try:
            found = p.is_dir()
        except OSError as exc:  # a name too long, a loop of links
            raise BadInput(f"{str(p)[:200]}: not a usable path: {exc.strerror or exc}") from None
        if not found:
            raise BadInput(f"{p}: no such run directory")
        return cls(p)

    @classmethod
    def latest(cls, base: str | Path, suffix: str = "") -> RunDir:
        """The newest run directory under `base` whose name ends with `suffix`."""
        root = Path(base)
        dirs = sorted(d for d in root.glob("*") if d.is_dir() and d.name.endswith(suffix)) if root.is_dir() else []
        if not dirs:
            raise BadInput(f"no run directory under {root}")
        return cls(dirs[-1])

    def file(self, name: str) -> Path:
        return self.path / _safe(name, "file name")

    def files(self) -> list[str]:
        return sorted(p.name for p in self.path.iterdir() if p.is_file())

    # ------------------------------------------------------------------ JSON

    def write_json(self, name: str, obj: BaseModel | Mapping[str, Any] | list[Any]) -> Path:
        """Write a pydantic model or plain JSON data as `<name>.json`: whole (atomicfile), secrets masked."""
        path = self.file(_with_ext(name, ".json"))
        plain = obj.model_dump(mode="json") if isinstance(obj, BaseModel) else obj
        data = orjson.dumps(
            redact_data(plain), option=orjson.OPT_INDENT_2 | orjson.OPT_NON_STR_KEYS | orjson.OPT_SERIALIZE_NUMPY
        )
        return write_atomic(path, data)

    @overload
    def read_json(self, name: str) -> Any: ...

    @overload
    def read_json(self, name: str, model: type[M]) -> M: ...

    def read_json(self, name: str, model: type[M] | None = None) -> Any:
        """Read `<name>.json`, validated into `model` when one is given."""
        path = self.file(_with_ext(name, ".json"))
        if not path.exists():
            raise BadInput(f"{path}: missing from the run directory")
        raw = read_bytes(path, max_bytes=MAX_JSON_BYTES, what="run result (JSON)")
        try:
            return orjson.loads(raw) if model is None else model.model_validate_json(raw)
        except orjson.JSONDecodeError as exc:
            raise UnreadableRunFile(f"{path}: malformed JSON: {exc}") from None
        except ValidationError as exc:
            first = exc.errors()[0]
            where = ".".join(str(x) for x in first["loc"]) or "(top level)"
            more = f" (and {exc.error_count() - 1} more)" if exc.error_count() > 1 else ""
            raise UnreadableRunFile(
                f"{path}: not a {model.__name__ if model else 'result'}: {where}: {first['msg']}{more}"
            ) from None

    def has(self, name: str) -> bool:
        return self.file(name).exists()

    # ------------------------------------------------------------------ Parquet

    def write_records(self, name: str, rows: Iterable[Mapping[str, Any]], schema: pa.Schema | None = None) -> Path:
        """Write rows (dicts) as `<name>.parquet`; pass `schema` when some columns may be all-null."""
        path = self.file(_with_ext(name, ".parquet"))
        table = pa.Table.from_pylist(_clean_rows(rows), schema=schema)
        with atomic_path(path) as tmp:
            pq.write_table(table, tmp)
        return path

    def record_writer(
        self, name: str, schema: pa.Schema, *, redacted: bool = True, statistics: bool | list[str] = True
    ) -> RecordWriter:
        """An appending writer for `<name>.parquet` (row group per append); redacted=False when the caller has
        masked its free-text values already (every string of every row through `redact` costs ~0.2 ms a row)."""
        return RecordWriter(self.file(_with_ext(name, ".parquet")), schema, redacted=redacted, statistics=statistics)

    def read_records(self, name: str, columns: list[str] | None = None) -> list[dict[str, Any]]:
        path = self.file(_with_ext(name, ".parquet"))
        parts = self.file(name.removesuffix(".parquet"))
        if not path.exists() and parts.is_dir():  # a checkpointed run: closed parts <name>/part-*.parquet
            path = parts
        elif not path.exists():
            partial = path.with_suffix(".parquet.partial")
            if not partial.exists():
                raise BadInput(f"{path}: missing from the run directory")
            path = partial
        if not path.is_dir() and not path.is_file():  # a FIFO or device where a Parquet file belongs
            raise BadInput(f"{path}: not a regular file")
        try:
            table = pq.read_table(path, columns=columns)
        except (pa.ArrowInvalid, OSError) as exc:
            raise BadInput(f"{path}: not a readable Parquet file: {exc}") from None
        return table.to_pylist()

    def query(self, sql: str) -> list[dict[str, Any]]:
        """Run DuckDB SQL where every `<name>.parquet` of the run is a view named `<name>`."""
        import duckdb

        con = duckdb.connect()
        try:
            sources = [(p.stem, p.as_posix()) for p in sorted(self.path.glob("*.parquet"))]
            sources += [
                (d.name, f"{d.as_posix()}/*.parquet")
                for d in sorted(self.path.iterdir())
                if d.is_dir() and any(d.glob("*.parquet"))
            ]  # a checkpointed run's parts
            for stem, where in sources:
                view = _NAME.sub("_", stem)
                quoted = where.replace("'", "''")
                con.execute(f"CREATE VIEW \"{view}\" AS SELECT * FROM read_parquet('{quoted}')")
            cur = con.execute(sql)
            cols = [d[0] for d in cur.description or []]
            return [dict(zip(cols, r, strict=True)) for r in cur.fetchall()]
        finally:
            con.close()
