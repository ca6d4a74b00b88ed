"""The quantization-method vocabulary: which scheme a checkpoint's `quantization_config` describes.

The per-method layouts (bits, scale granularity and dtype, zero points, index tensors, which modules stay in
16 bits) are data in `data/quantization.yaml`, each citing the loader it was read from. This module turns a
`quantization_config` into a `QuantScheme` and says which modules it keeps in 16 bits; it imports nothing else of
switchover, so both `model/` (which prices weights with it, `model/weight_bytes.py`) and `engines/` (which names a
checkpoint's weight format with it, `engines/formats.py`) can read it.
"""

from __future__ import annotations

import fnmatch
import math
import re
from functools import cache
from importlib import resources
from typing import Any, Literal

import yaml
from pydantic import BaseModel, Field, PrivateAttr

Granularity = Literal["tensor", "channel", "group", "block"]
MatchMode = Literal["name", "substring"]

MAX_IGNORE = 10_000  # modules a checkpoint may list as kept in 16 bits; every weight group is matched against them
MAX_PATTERN = 300  # characters of one `re:` rule
MAX_BITS = 32
MAX_GROUP = 1 << 30
# `re:` rules are matched with Python's backtracking engine: a repeated group ((a+)+, (.*)*x) or many unbounded
# repeats take exponential or high-polynomial time on a module name, so such a rule is not evaluated (noted).
_NESTED_REPEAT = re.compile(r"\)[*+{]")
_UNBOUNDED = re.compile(r"(?<!\\)[*+]")


class UnknownMethod(ValueError):
    """A quant_method the table has no entry for (other ValueErrors: a known method with malformed fields)."""


class QuantScheme(BaseModel):
    """One checkpoint's weight quantization, resolved from its quantization_config."""

    method: str
    bits: float
    granularity: Granularity
    group_size: int | None = None
    block: tuple[int, int] | None = None
    scale_bytes: float
    zero_point: bool = False
    index_bytes_per_input: int = 0
    per_tensor_extra_bytes: int = Field(default=0, description="global scales stored once per tensor")
    ignore: list[str] = Field(default_factory=list, description="modules the checkpoint keeps in 16 bits")
    match: MatchMode = "name"
    kept: list[str] = Field(default_factory=list, description="roles never quantized")
    targets: list[str] | None = Field(default=None, description="only these roles are quantized")
    loaded_hidden_multiple: int | None = Field(
        default=None, description="engines pad the hidden dim of quantized weights to this multiple once loaded"
    )
    source: str
    notes: list[str] = Field(default_factory=list, description="parts of the config not used, with why")
    _ignored: dict[str, bool] = PrivateAttr(default_factory=dict)  # module name -> on the ignore list

    def describe(self) -> str:
        """e.g. 'awq 4-bit, group 128, zero points'."""
        bits = f"{self.bits:g}-bit"
        gran = {
            "tensor": "per tensor",
            "channel": "per channel",
            "group": f"group {self.group_size}",
            "block": f"block {self.block[0]}x{self.block[1]}" if self.block else "block",
        }[self.granularity]
        extra = ", zero points" if self.zero_point else ""
        only = f", {'/'.join(self.targets)} only" if self.targets else ""
        return f"{self.method} {bits}, {gran}{extra}{only}"


@cache
def method_table() -> dict[str, Any]:
    """The cited per-method data (methods and aliases)."""
    text = resources.files("switchover").joinpath("data", "quantization.yaml").read_text(encoding="utf-8")
    data: dict[str, Any] = yaml.safe_load(text)
    return data


def _first(cfg: dict[str, Any], keys: list[str]) -> Any:
    for key in keys:
        if cfg.get(key) is not None:
            return cfg[key]
    return None


def _ignore_list(qc: dict[str, Any], keys: list[str], notes: list[str]) -> list[str]:
    """The keep-16-bit rules; `re:` rules that could backtrack without bound are left out and noted."""
    out: list[str] = []
    for key in keys:
        value = qc.get(key)
        if isinstance(value, list):
            out += [str(v) for v in value]
    if len(out) > MAX_IGNORE:
        raise ValueError(f"quantization_config lists {len(out)} modules to keep in 16 bits (at most {MAX_IGNORE})")
    safe = []
    for rule in out:
        body = rule[3:] if rule.startswith("re:") else None
        if body is not None and (
            len(body) > MAX_PATTERN or _NESTED_REPEAT.search(body) or len(_UNBOUNDED.findall(body)) > 3
        ):
            notes.append(
                f"quantization_config ignore rule {rule[:60]!r} not evaluated (a repeated group or too "
                "many repeats: matching could take unbounded time); its modules are priced as quantized"
            )
            continue
        safe.append(rule)
    return safe


def _whole(value: Any, what: str, lo: int, hi: int) -> int:
    """A whole number from a quantization_config field; ValueError (priced at 16 bits, noted) otherwise."""
    ok = (
        not isinstance(value, bool)
        and isinstance(value, int | float)
        and math.isfinite(value)
        and float(value).is_integer()
        and lo <= value <= hi
    )
    if not ok:
        raise ValueError(
            f"quantization_config {what} must be a whole number from {lo} to {hi}, got {str(value)[:40]!r}"
        )
    return int(value)


def _block(value: Any, what: str) -> tuple[int, int]:
    if not isinstance(value, list | tuple) or len(value) != 2:
        raise ValueError(f"quantization_config {what} must be two block sizes, got {str(value)[:40]!r}")
    return _whole(value[0], what, 1, MAX_GROUP), _whole(value[1], what, 1, MAX_GROUP)


def scheme_from_config(qc: dict[str, Any] | None) -> QuantScheme | None:
    """The scheme a quantization_config describes; None when absent. Unknown methods raise ValueError."""
    if not isinstance(qc, dict) or not qc:
        return None
    if isinstance(qc.get("quantization"), dict):  # hf_quant_config.json (ModelOpt) nests the fields
        qc = {"quant_method": "modelopt", **qc["quantization"]}
    table = method_table()
    named = qc.get("quant_method")
    if named is not None and not isinstance(named, str):
        raise ValueError(f"quantization_config quant_method must be a name, got {str(named)[:40]!r}")
    raw_method = str(named or (qc.get("quant_algo") and "modelopt") or "").lower()
    if not raw_method and (qc.get("load_in_4bit") or qc.get("load_in_8bit")):
        raw_method = "bitsandbytes"
    method = table["aliases"].get(raw_method, raw_method)
    if method not in table["methods"]:
        raise UnknownMethod(f"quantization method {raw_method[:40] or '(none)'!r} is not in the table")
    spec = table["methods"][method]
    notes: list[str] = []
    fields: dict[str, Any] = {
        "method": method,
        "bits": spec["bits"],
        "granularity": spec["granularity"],
        "group_size": spec.get("group_size"),
        "scale_bytes": spec["scale_bytes"],
        "zero_point": spec.get("zero_point", False),
        "index_bytes_per_input": spec.get("index_bytes_per_input", 0),
        "ignore": _ignore_list(qc, spec.get("ignore_keys", []), notes),
        "kept": spec.get("kept", []),
        "targets": spec.get("targets"),
        "source": spec["source"],
        "match": spec.get("match", "name"),
        "loaded_hidden_multiple": spec.get("loaded_hidden_multiple"),
        "notes": notes,
    }
    if (bits := _first(qc, spec.get("bits_keys", []))) is not None:
        fields["bits"] = _whole(bits, "bits", 1, MAX_BITS)
    if (group := _first(qc, spec.get("group_keys", []))) is not None:
        fields["group_size"] = _whole(group, "group_size", -1, MAX_GROUP)
    if (zero := _first(qc, spec.get("zero_keys", []))) is not None:
        fields["zero_point"] = bool(zero)
    if (block := _first(qc, spec.get("block_keys", []))) is not None:
        fields["granularity"], fields["block"] = "block", _block(block, "weight block size")
    parser = spec.get("parser")
    if parser == "compressed_tensors":
        _compressed_tensors(qc, fields)
    elif parser == "modelopt":
        _modelopt(qc, fields)
    elif parser == "bitsandbytes":
        _bitsandbytes(qc, fields)
    if fields["granularity"] == "group" and (fields["group_size"] or 0) <= 0:  # GPTQ group_size -1: per channel
        fields["granularity"], fields["group_size"] = "channel", None
    return QuantScheme(**fields)


def _compressed_tensors(qc: dict[str, Any], f: dict[str, Any]) -> None:
    """config_groups.*.weights: num_bits, type, strategy, group_size, block_structure, symmetric."""
    groups = qc.get("config_groups") or {}
    if not isinstance(groups, dict):
        raise ValueError(f"quantization_config config_groups must be a mapping, got {str(groups)[:40]!r}")
    weights = next((g.get("weights") for g in groups.values() if isinstance(g, dict) and g.get("weights")), None)
    if not isinstance(weights, dict):
        return
    f["bits"] = _whole(weights.get("num_bits") or 8, "num_bits", 1, MAX_BITS)
    strategy = str(weights.get("strategy") or "tensor")
    is_float = weights.get("type") == "float"
    if strategy in ("group", "tensor_group"):
        f["granularity"], f["group_size"] = (
            "group",
            _whole(weights.get("group_size") or 128, "group_size", 1, MAX_GROUP),
        )
    elif strategy == "block" and weights.get("block_structure"):
        f["granularity"], f["block"] = "block", _block(weights["block_structure"], "block_structure")
    elif strategy in ("channel", "tensor"):
        f["granularity"] = strategy
    if is_float and f["bits"] == 4:  # NVFP4: fp8 scale per 16 plus fp32 global weight and input scales
        f["scale_bytes"], f["per_tensor_extra_bytes"] = 1, 8
    elif is_float:
        f["scale_bytes"] = 4
    f["zero_point"] = weights.get("symmetric") is False


def _modelopt(qc: dict[str, Any], f: dict[str, Any]) -> None:
    """quant_algo FP8 | FP8_PB_WO | NVFP4 | W4A8_AWQ (ModelOpt's hf_quant_config.json or config.json)."""
    algo = str(qc.get("quant_algo") or "FP8").upper()[:40]
    if "FP4" in algo:
        f.update(
            bits=4,
            granularity="group",
            group_size=_whole(qc.get("group_size") or 16, "group_size", 1, MAX_GROUP),
            scale_bytes=1,
            per_tensor_extra_bytes=8,
        )
    elif "AWQ" in algo or "INT4" in algo:
        f.update(
            bits=4,
            granularity="group",
            group_size=_whole(qc.get("group_size") or 128, "group_size", 1, MAX_GROUP),
            scale_bytes=2,
        )
    elif "PB" in algo or "BLOCK" in algo:
        f.update(bits=8, granularity="block", block=(128, 128), scale_bytes=4)
    else:
        f.update(bits=8, granularity="tensor", scale_bytes=4, per_tensor_extra_bytes=4)
    f["method"] = f"modelopt {algo.lower()}"


def _bitsandbytes(qc: dict[str, Any], f: dict[str, Any]) -> None:
    """load_in_8bit: int8 + fp32 per row; 4-bit: 64-value blocks, absmax fp32 or uint8 with double quant."""
    if qc.get("load_in_8bit") and not qc.get("load_in_4bit"):
        f.update(bits=8, granularity="channel", scale_bytes=4)
    elif qc.get("bnb_4bit_use_double_quant"):
        f.update(bits=4, granularity="group", group_size=64, scale_bytes=1 + 4 / 256)


def _compiled(pattern: str) -> re.Pattern[str] | None:
    if pattern.startswith("re:"):
        try:
            return re.compile(pattern[3:])
        except re.error:
            return None
    return None


def is_ignored(name: str, scheme: QuantScheme) -> bool:
    """Whether a module name is on the checkpoint's keep-16-bit list (exact, suffix, wildcard or `re:` rules);
    remembered per name, since every TP size prices the same groups again."""
    known = scheme._ignored.get(name)
    if known is None:
        known = scheme._ignored[name] = _on_ignore_list(name, scheme)
    return known


def _on_ignore_list(name: str, scheme: QuantScheme) -> bool:
    for pattern in scheme.ignore:
        rx = _compiled(pattern)
        if rx is not None:
            if rx.match(name):
                return True
            continue
        if scheme.match == "substring":
            if pattern in name:
                return True
        elif name == pattern or name.endswith("." + pattern) or fnmatch.fnmatchcase(name, pattern):
            return True
    return False
