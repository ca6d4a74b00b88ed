"""Weight bytes of a model as an engine loads them: exact from safetensors headers or the index's
`metadata.total_size`, else estimated from the config's parameter inventory priced by its quantization method
(`quantization.py`, `model/weight_bytes.py`), each with its source; and how the bytes split across TP ranks."""

from __future__ import annotations

import json
import math
import struct
from pathlib import Path
from typing import Any

from pydantic import BaseModel, Field

from switchover.errors import BadInput
from switchover.model.inventory import WeightGroup, mtp_layers, text_config, weight_groups
from switchover.model.source import read_json
from switchover.model.weight_bytes import group_bytes, price
from switchover.quantization import QuantScheme, UnknownMethod, scheme_from_config


class WeightsInfo(BaseModel):
    """Weight bytes and parameters: exact from file headers or the safetensors index, or estimated from the config
    (priced per quantization method when the config names one)."""

    origin: str = Field(description="safetensors | safetensors-index | gguf | quantization-table | estimated")
    total_bytes: int
    params: int
    bytes_by_dtype: dict[str, int] = Field(default_factory=dict)
    files: list[str] = Field(default_factory=list)
    quantization: str | None = None
    scheme: str | None = Field(default=None, description="resolved quantization scheme, e.g. 'awq 4-bit, group 128'")
    source: str = Field(default="", description="where the byte count came from, in words")
    warning: str | None = Field(default=None, description="set when the bytes are a 16-bit guess")
    replicated_fraction: float = Field(default=0.0, description="share of bytes every TP rank holds whole")
    kv_fraction: float = Field(default=0.0, description="share of bytes in K/V projections (replicated past kv heads)")
    kv_heads: int | None = None
    excluded_bytes: int = Field(default=0, description="stored but not loaded (MTP layers without speculation)")

    def per_rank_bytes(self, tp: int) -> float:
        """Bytes on one TP rank: sharded parts divided, replicated parts whole, K/V past the KV heads one head."""
        if tp <= 1:
            return float(self.total_bytes)
        kv_div = min(tp, self.kv_heads) if self.kv_heads else tp
        shard = 1.0 - self.replicated_fraction - self.kv_fraction
        return self.total_bytes * (self.replicated_fraction + shard / tp + self.kv_fraction / kv_div)


def estimate_weights(cfg: dict[str, Any], kv_heads: int, quant_cfg: Any) -> tuple[WeightsInfo, list[str]]:
    """Bytes from the config's parameter inventory, priced by the quantization method when one is named."""
    notes: list[str] = []
    failure: str | None = None
    unknown = False
    try:
        scheme = scheme_from_config(quant_cfg)
    except ValueError as exc:
        scheme, failure, unknown = None, str(exc), isinstance(exc, UnknownMethod)
        notes.append(f"{exc}: weights priced at 2 bytes/param")
    if quant_cfg and not isinstance(quant_cfg, dict):
        failure = f"quantization_config is not a mapping ({str(quant_cfg)[:40]!r})"
        notes.append(f"{failure}: weights priced at 2 bytes/param")
    if scheme is not None:
        notes += scheme.notes
    groups = weight_groups(cfg)
    priced = price(groups, scheme, kv_heads, hidden=int(text_config(cfg)["hidden_size"]))
    named = quant_cfg.get("quant_method") if isinstance(quant_cfg, dict) else None
    method = named if isinstance(named, str) else None
    if scheme is not None:
        origin, source, warning = (
            "quantization-table",
            (
                f"estimated: config.json parameter inventory priced as {scheme.describe()} "
                "(quantization table, data/quantization.yaml)"
            ),
            None,
        )
    else:
        origin, source = "estimated", "estimated: config.json parameter inventory at 2 bytes/param (bf16)"
        warning = "weights are a 16-bit estimate from config.json (no safetensors index or weight files): " + (
            "the quantization method is unknown, so a quantized checkpoint is oversized"
            if unknown
            else f"the quantization_config could not be read ({failure}), so a quantized checkpoint is oversized"
            if failure
            else "pass --weights-gib or a model folder/repo with model.safetensors.index.json for the exact size"
        )
    info = WeightsInfo(
        origin=origin,
        total_bytes=int(priced.total_bytes),
        params=priced.params,
        quantization=method or (scheme.method if scheme else None),
        scheme=scheme.describe() if scheme else None,
        source=source,
        warning=warning,
        **shard_fractions(groups, scheme, kv_heads),
    )
    return info, notes


def shard_fractions(groups: list[WeightGroup], scheme: QuantScheme | None, kv_heads: int) -> dict[str, Any]:
    """Which share of the bytes is replicated on every TP rank, and which is K/V projections."""
    total = sum(group_bytes(g, scheme) for g in groups) or 1.0
    repl = sum(group_bytes(g, scheme) for g in groups if g.shard == "replicated")
    kv = sum(group_bytes(g, scheme) for g in groups if g.shard == "kv")
    return {"replicated_fraction": repl / total, "kv_fraction": kv / total, "kv_heads": kv_heads}


def mtp_bytes(cfg: dict[str, Any], info: WeightsInfo) -> int:
    """Bytes of MTP layers a checkpoint stores (one decoder layer each, estimated) that engines skip."""
    n = mtp_layers(cfg)
    if not n:
        return 0
    est, _ = estimate_weights(cfg, info.kv_heads or 1, cfg.get("quantization_config"))
    layers = int(text_config(cfg).get("num_hidden_layers") or 1)
    groups = weight_groups(cfg)
    edge = sum(group_bytes(g, None) for g in groups if g.role in ("embed", "lm_head", "vision"))
    return int(n * max(est.total_bytes - edge, 0) / layers)


MAX_HEADER_BYTES = 100 * 2**20  # the safetensors format's own limit on the JSON header
Tensor = tuple[str, str, list[int], int, int]  # name, dtype, shape, absolute data offset, bytes


def _header(path: Path) -> tuple[int, dict[str, Any]]:
    """(header length, JSON header) of a .safetensors file (8-byte little-endian length, then JSON)."""
    try:
        with path.open("rb") as fh:
            raw = fh.read(8)
            if len(raw) != 8:
                raise BadInput(f"{path}: not a safetensors file (shorter than 8 bytes)")
            (size,) = struct.unpack("<Q", raw)
            if size > MAX_HEADER_BYTES or size > path.stat().st_size - 8:
                raise BadInput(f"{path}: not a safetensors file (header length {size} is implausible)")
            text = fh.read(size)
    except OSError as exc:
        raise BadInput(f"{path}: cannot read: {exc.strerror or exc}") from None
    try:
        header = json.loads(text)
    except (json.JSONDecodeError, UnicodeDecodeError) as exc:
        raise BadInput(f"{path}: safetensors header is not JSON: {exc}") from None
    except RecursionError:
        raise BadInput(f"{path}: safetensors header is JSON nested too deeply") from None
    if not isinstance(header, dict):
        raise BadInput(f"{path}: safetensors header is not a JSON object")
    return size, header


def read_safetensors_header(path: Path) -> dict[str, Any]:
    """The JSON header of a .safetensors file; no tensor data read."""
    return _header(path)[1]


def _whole(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and value >= 0


def safetensors_table(path: Path) -> list[Tensor]:
    """Every tensor of a .safetensors file from its header, checked (dtype a name, shape whole numbers, data
    offsets inside the file); BadInput naming the tensor otherwise. The one safetensors reader of the package."""
    size, header = _header(path)
    base, data_bytes = 8 + size, path.stat().st_size - 8 - size
    out: list[Tensor] = []
    for name, entry in header.items():
        if name == "__metadata__":
            continue
        spec = entry if isinstance(entry, dict) else {}
        dtype, shape, offsets = spec.get("dtype"), spec.get("shape"), spec.get("data_offsets")
        if (
            not isinstance(dtype, str)
            or not isinstance(shape, list)
            or not all(_whole(d) for d in shape)
            or not isinstance(offsets, list)
            or len(offsets) != 2
            or not all(_whole(o) for o in offsets)
            or not offsets[0] <= offsets[1] <= data_bytes
        ):
            raise BadInput(
                f"{path}: tensor {str(name)[:80]!r} has no valid dtype, shape and data_offsets inside "
                "the file (corrupt or truncated safetensors)"
            )
        out.append((name, dtype, list(shape), base + offsets[0], offsets[1] - offsets[0]))
    return out


def weights_from_safetensors(
    files: list[Path], quant: str | None = None, tables: dict[Path, list[Tensor]] | None = None
) -> WeightsInfo:
    """Exact bytes (data offsets) and parameter counts (shapes) from safetensors headers."""
    by_dtype: dict[str, int] = {}
    params = 0
    for path in files:
        for _name, dtype, shape, _offset, nbytes in (tables or {}).get(path) or safetensors_table(path):
            by_dtype[dtype] = by_dtype.get(dtype, 0) + nbytes
            params += math.prod(shape)
    return WeightsInfo(
        origin="safetensors",
        total_bytes=sum(by_dtype.values()),
        params=params,
        bytes_by_dtype=by_dtype,
        files=[p.name for p in files],
        quantization=quant,
    )


def exact_weights(folder: Path, estimate: WeightsInfo, cfg: dict[str, Any] | None = None) -> WeightsInfo | None:
    """Exact bytes from safetensors headers (all shards present) or the index's metadata.total_size; the TP split
    and the scheme come from the estimate. A tied lm_head stored anyway is not loaded, so it is taken out.
    None when neither headers nor index are available."""
    shards = sorted(folder.glob("*.safetensors"))
    index_path = folder / "model.safetensors.index.json"
    index = read_json(index_path)
    weight_map = (index or {}).get("weight_map")
    if isinstance(weight_map, dict) and not all(isinstance(v, str) for v in weight_map.values()):
        raise BadInput(f"{index_path}: weight_map must map tensor names to shard file names")
    listed = set(weight_map.values()) if isinstance(weight_map, dict) else set()
    keep = {
        k: getattr(estimate, k) for k in ("quantization", "scheme", "replicated_fraction", "kv_fraction", "kv_heads")
    }
    if listed and listed <= {p.name for p in shards}:
        shards = [p for p in shards if p.name in listed]  # Mistral repos also ship consolidated.safetensors
    if shards and (not listed or listed <= {p.name for p in shards}):
        tables = {p: safetensors_table(p) for p in shards}
        info = weights_from_safetensors(shards, estimate.quantization, tables)
        info = info.model_copy(update={**keep, "source": f"exact: safetensors headers of {len(shards)} file(s)"})
        sizes = {t[0]: t[4] for table in tables.values() for t in table}
        names = set(sizes)
    elif index is not None:
        total = (index.get("metadata") or {}).get("total_size")
        if not isinstance(total, int) or isinstance(total, bool) or total <= 0:
            raise BadInput(f"{index_path}: metadata.total_size is missing or not a positive integer")
        info = WeightsInfo(
            origin="safetensors-index",
            total_bytes=total,
            params=estimate.params,
            files=[index_path.name],
            source="exact: model.safetensors.index.json metadata.total_size",
            **keep,
        )
        names = set(weight_map) if isinstance(weight_map, dict) else set()
        sizes = {}
    else:
        return None
    text = text_config(cfg or {})
    if (
        text.get("tie_word_embeddings")
        and "lm_head.weight" in names
        and text.get("vocab_size")
        and text.get("hidden_size")
    ):
        # its size from the header when the shards are here; the index has names only (priced at 2 bytes)
        tied = sizes.get("lm_head.weight") or int(text["vocab_size"]) * int(text["hidden_size"]) * 2
        how = "" if "lm_head.weight" in sizes else ", estimated at 2 bytes/param"
        info = info.model_copy(
            update={
                "total_bytes": info.total_bytes - tied,
                "excluded_bytes": tied,
                "source": info.source + f"; minus {tied / 2**30:.2f} GiB of lm_head.weight (tie_word_embeddings: "
                f"engines reuse the embedding{how})",
            }
        )
    return info
