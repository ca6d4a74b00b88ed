"""Weights fingerprint: a content hash over tensor names, dtypes, shapes and data (safetensors or GGUF), streamed
in sorted tensor order, so that re-sharding or metadata edits do not change it but any weight byte does."""

from __future__ import annotations

import hashlib
import time
from pathlib import Path
from typing import Any, BinaryIO

from pydantic import BaseModel, Field

from switchover.errors import BadInput
from switchover.model.sizing import safetensors_table
from switchover.model.source import ggml_type_name, gguf_fields, resolve

_CHUNK = 8 << 20


class WeightsFingerprint(BaseModel):
    source: str
    format: str  # safetensors | gguf
    files: list[str]
    tensors: int
    params: int
    dtypes: dict[str, int] = Field(default_factory=dict)  # dtype -> tensors
    bytes_hashed: int
    hash: str
    seconds: float


def _stream(h: Any, f: BinaryIO, offset: int, n: int) -> None:
    f.seek(offset)
    left = n
    while left > 0:
        buf = f.read(min(_CHUNK, left))
        if not buf:
            raise BadInput(f"{f.name}: file ends before a tensor's data does (truncated download?)")
        h.update(buf)
        left -= len(buf)


def weights_hash(path: str | Path) -> WeightsFingerprint:
    """blake2b-128 over every tensor (name, dtype, shape, bytes) in name order."""
    t0 = time.perf_counter()
    kind, p = resolve(path)
    if kind == "gguf":
        files = [p]
        table = {
            p: [(n, ggml_type_name(ty), shape, off, nb) for n, ty, shape, off, nb in gguf_fields(p)["__tensors__"]]
        }
        fmt = "gguf"
    else:
        files = sorted(p.glob("*.safetensors"))
        if not files:
            raise BadInput(f"{p}: no *.safetensors files (only safetensors and GGUF weights are hashed)")
        table = {f: safetensors_table(f) for f in files}
        fmt = "safetensors"
    rows = sorted(
        ((name, dt, shape, off, nb, f) for f, t in table.items() for name, dt, shape, off, nb in t), key=lambda r: r[0]
    )
    h = hashlib.blake2b(digest_size=16)
    dtypes: dict[str, int] = {}
    params = hashed = 0
    handles = {}
    try:
        for f in files:
            handles[f] = f.open("rb")
        for name, dt, shape, off, nb, f in rows:
            h.update(f"{name}|{dt}|{shape}|".encode())
            _stream(h, handles[f], off, nb)
            dtypes[dt] = dtypes.get(dt, 0) + 1
            count = 1
            for x in shape:
                count *= x
            params += count
            hashed += nb
    except OSError as exc:
        raise BadInput(f"{p}: cannot read the weights: {exc}") from None
    finally:
        for fh in handles.values():
            fh.close()
    return WeightsFingerprint(
        source=str(p),
        format=fmt,
        files=[str(f) for f in files],
        tensors=len(rows),
        params=params,
        dtypes=dtypes,
        bytes_hashed=hashed,
        hash=h.hexdigest(),
        seconds=round(time.perf_counter() - t0, 3),
    )
